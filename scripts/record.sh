#!/usr/bin/env bash
# Re-record kernelscope's GPU fixtures (tests/data, src/kernelscope/data) and the measurements of
# benchmarks/results/RESULTS.md, one target at a time, from the repo root of a GPU machine:
#   OUT=/tmp/out bash scripts/record.sh TARGET [ARGS]
# TARGET: fixtures | counters | analysis | gpu_stats | marlin | instrumented | memory | ranks (each below, with
# what it writes and needs), check_ranks (the multi-GPU end-to-end check, which runs `ranks` first), or all (the
# record targets in turn, each in its own subshell; ranks needs 2 GPUs). No target changes clocks or GPU settings.

# Re-record the GPU fixtures under tests/data and the bundled demo session.
# Run from the repo root on a machine with an NVIDIA GPU, torch, triton and ncu:
#   OUT=/tmp/fixtures bash scripts/record.sh fixtures
# then copy $OUT/fixtures/* into tests/data/ (demo_session.json, gzipped, into
# src/kernelscope/data/). Never changes clocks: ncu runs with --clock-control none.
target_fixtures() {
set -u
O=${OUT:-/tmp/kernelscope-fixtures}
F=$O/fixtures
mkdir -p "$F"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="python3 -m kernelscope"
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
echo "device: $DEV  date: $(date -u +%F)" | tee "$O/record.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$O/record.log"

step() { echo "== $*" | tee -a "$O/record.log"; }

step "trace pass: mixed workload"
$KS run -f -o "$F/session_h100_mixed.json" --keep-trace "$F/trace_h100_mixed.json" -- python3 tests/workloads/mixed.py >> "$O/record.log" 2>&1; echo "rc=$?" >> "$O/record.log"
step "trace pass: occupancy sweep"
$KS run -f -o "$F/session_h100_sweep.json" -- python3 tests/workloads/occupancy_sweep.py >> "$O/record.log" 2>&1; echo "rc=$?" >> "$O/record.log"
step "trace pass: workload that raises"
$KS run -f -o "$F/session_h100_raises.json" -- python3 tests/workloads/raises_after_kernels.py >> "$O/record.log" 2>&1; echo "rc=$?" >> "$O/record.log"
for w in mixed occupancy_sweep; do
  step "ncu occupancy: $w"
  ncu --clock-control none --section LaunchStats --section Occupancy \
      --metrics sm__warps_active.avg.pct_of_peak_sustained_active -f -o "/tmp/occ_$w" \
      python3 tests/workloads/$w.py >> "$O/record.log" 2>&1
  ncu --import "/tmp/occ_$w.ncu-rep" --csv --page raw > "/tmp/occ_$w.csv"
  python3 scripts/ncu_occupancy_table.py "/tmp/occ_$w.csv" > "$F/ncu_occupancy_h100_$w.csv"
done
step "demo"
$KS demo -f -o "$F/demo_session.json" --width 120 --no-color > "$O/demo_show.txt" 2>> "$O/record.log"; echo "rc=$?" >> "$O/record.log"
step "gpu tests"
python3 -m pytest -q -m gpu tests > "$O/gpu_tests.log" 2>&1; echo "rc=$?" >> "$O/record.log"
tail -5 "$O/gpu_tests.log" >> "$O/record.log"
gzip -9f "$F"/*.json
tar -C "$O" -czf "$O/fixtures.tar.gz" fixtures && rm -rf "$F"
step "done"
ls -la "$O" | tee -a "$O/record.log"
}

# Re-record the counter-pass fixtures and the counter-pass benchmark on a GPU machine:
#   OUT=/tmp/out bash scripts/record.sh counters [bench]
# Writes $OUT/counters.tar.xz (sessions, .ncu-rep reports, ncu details pages) and
# $OUT/bench_counters.txt. Never changes clocks (--clock-control none).
target_counters() {
set -u
O=${OUT:-/tmp/kernelscope-counters}; F=/tmp/ks_counters; rm -rf "$F"; mkdir -p "$O" "$F"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
NCU_PY=$(dirname "$(readlink -f "$(which ncu)")")/../extras/python
[ -d "$NCU_PY" ] || NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python | tail -1)
export PYTHONPATH=$PYTHONPATH:$NCU_PY
KS="python3 -m kernelscope"
nvcc -O3 -arch=sm_90 -o /tmp/access_patterns tests/workloads/cuda/access_patterns.cu || exit 1
if [ -d .whl ]; then  # the same ncu_report reader CI uses (PyPI ncu-report), carried as a wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
if [ "${1:-all}" != bench ]; then  # `record.sh counters bench`: the benchmark alone
echo "== python workload, both passes (top 8: every kernel of the workload)"
$KS run --counters --top 8 -f -o "$F/session_h100_counters.json" -- python3 tests/workloads/counters_small.py 2>&1 | tail -8
echo "== CUDA C++ program: counter pass only"
$KS run --counters -f -o "$F/session_h100_cuda.json" -- /tmp/access_patterns 2>&1 | tail -8
echo "== region filter"
$KS run --counters --region cublas_mm -f -o "$F/session_h100_region.json" -- python3 tests/workloads/counters_small.py 2>&1 | tail -4
echo "== hand-made report (plain ncu, default sections) for kernelscope import"
ncu --clock-control none -f -o "$F/handmade_cuda" /tmp/access_patterns > /dev/null 2>&1
ncu --import "$F/handmade_cuda.ncu-rep" --page details --print-units base --csv > "$F/handmade_cuda.details.csv"
for r in session_h100_counters session_h100_cuda; do
  ncu --import "$F/$r.ncu-rep" --page details --print-units base --csv > "$F/$r.details.csv"
done
fi
echo "== benchmark: mixed workload (14 distinct kernels), three ways"
$KS run -q -f -o /tmp/mixed_trace.json -- python3 tests/workloads/mixed.py > /dev/null 2>&1
KREGEX=$(python3 -c "from kernelscope.model import Session; from kernelscope.collect.ncu.merge import top_kernel_regex; print(top_kernel_regex(Session.load('/tmp/mixed_trace.json'), 100))")
N=$(python3 -c "from kernelscope.model import Session; from kernelscope.model.names import short_kernel_name as s; print(len({s(x.kernel) for x in Session.load('/tmp/mixed_trace.json').launches}))")
t() { local s=$(date +%s.%N); "$@" > /dev/null 2>&1; local rc=$?; echo "$(python3 -c "print(round($(date +%s.%N)-$s,2))") rc=$rc"; }
A=$(t python3 tests/workloads/mixed.py)
B=$(t ncu --clock-control none --set full --import-source no -f -o /tmp/full --kernel-name-base function --kernel-name "regex:$KREGEX" --filter-mode per-launch-config --launch-count 1 python3 tests/workloads/mixed.py)
C=$(t $KS run --counters --top 100 -q -f -o /tmp/ks_bench.json -- python3 tests/workloads/mixed.py)
MF=$(python3 -c "
import ncu_report
c = ncu_report.load_report('/tmp/full.ncu-rep'); r = c.range_by_idx(0); print(r.num_actions())")
MK=$(python3 -c "from kernelscope.model import Session; s=Session.load('/tmp/ks_bench.json'); print(sum(1 for x in s.launches if x.counters))")
{
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)  date: $(date -u +%F)  ncu: $(ncu --version | tail -1)"
echo "distinct kernels in workload: $N"
echo "workload alone (s):                     $A"
echo "ncu --set full, same kernels (s):       $B  results: $MF"
echo "kernelscope run --counters, both (s):   $C  results: $MK"
echo "replay passes per result (kernelscope): $(grep -o '[0-9]* passes' /tmp/ks_bench.ncu.log | sort | uniq -c | tr '\n' ' ')"
} | tee "$O/bench_counters.txt"
# nothing lost: every model field the panels use that --set full has, kernelscope's pass has too
python3 - <<'PY' | tee -a "$O/bench_counters.txt"
from kernelscope.collect.ncu.merge import resolve_fields
from kernelscope.collect.ncu.report_reader import read_report
ks = read_report("/tmp/ks_bench.ncu-rep"); full = read_report("/tmp/full.ncu-rep")
lost = set()
for a, b in zip(ks.kernels, full.kernels):
    ra, rb = resolve_fields(a.metrics), resolve_fields(b.metrics)
    lost |= {k for k in rb if not rb[k].is_missing and ra[k].is_missing}
print("panel fields present in --set full but missing from kernelscope's pass:", sorted(lost) or "none")
PY
ls -la "$F"
cd "$F" && tar -cJf "$O/counters.tar.xz" . && ls -la "$O"
}

# Record the analysis fixtures on a GPU machine:
#   OUT=/tmp/out bash scripts/record.sh analysis
# 1. `kernelscope calibrate` (measured ceilings, kept as $OUT/ceilings_h100.json);
# 2. a counter-pass session of tests/workloads/counters_small.py (Triton, cuBLAS, cuDNN attention, PyTorch;
#    regions declare their work) and the details page of its report, for the fidelity test;
# 3. `kernelscope show` of that session with the ceilings, as a check.
# Everything lands in $OUT/analysis.tar.xz. Never changes clocks (--clock-control none).
target_analysis() {
set -u
O=${OUT:-/tmp/kernelscope-analysis}; F=/tmp/ks_analysis; rm -rf "$F"; mkdir -p "$O" "$F"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} KERNELSCOPE_CACHE_DIR=$F/cache
if [ -d .whl ]; then  # the ncu_report reader CI uses (PyPI ncu-report), carried as a wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
KS="python3 -m kernelscope"
echo "== calibrate"
$KS calibrate --force 2>&1 | tail -12
cp "$F"/cache/ceilings-*.json "$F/ceilings_h100.json"
echo "== counters_small, both passes (top 8: every kernel of the workload)"
$KS run --counters --top 8 -f -o "$F/session_h100_counters.json" -- python3 tests/workloads/counters_small.py 2>&1 | tail -6
ncu --import "$F/session_h100_counters.ncu-rep" --page details --print-units base --csv > "$F/session_h100_counters.details.csv"
echo "== show"
$KS show "$F/session_h100_counters.json" --width 140 --no-color > "$F/show_counters.txt" 2>&1; echo "show rc=$?"
grep -n -i -A3 "roofline\|bound" "$F/show_counters.txt" | head -40
tar -C "$F" -cJf "$O/analysis.tar.xz" --exclude=cache --exclude="*.ncu-rep" .
ls -la "$F"
}

# Record the live-sampler fixture and measure what sampling costs, on a GPU machine:
#   OUT=/tmp/gpu_stats bash scripts/record.sh gpu_stats
# Writes under $OUT: session_h100_samples.json.gz (-> tests/data/), show_samples.txt,
# top.json, top.txt, overhead.json and record.log (the measurements, table last).
# Never changes clocks or any GPU setting.
target_gpu_stats() {
set -u
O=${OUT:-/tmp/kernelscope-gpu-stats}
T=$(mktemp -d)
mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="python3 -m kernelscope"
LOG=$O/record.log
W=tests/workloads/steady_matmul.py
step() { echo "== $*" >> "$LOG"; }

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv
  python3 -c "import importlib.metadata as m, torch; print('nvidia-ml-py', m.version('nvidia-ml-py'), '· torch', torch.__version__)"
} > "$LOG" 2>&1

step "fixture: steady_matmul at 50 ms"
KS_CLOCK_CHECK=$T/clock.json $KS run -f --sample-interval 50 -o "$O/session_h100_samples.json" -- python3 $W >> "$LOG" 2>&1
echo "rc=$?" >> "$LOG"
python3 - "$O/session_h100_samples.json" "$T/clock.json" >> "$LOG" 2>&1 <<'EOF'
import json, sys
from kernelscope.model import Session
s = Session.load(sys.argv[1]); c = json.load(open(sys.argv[2]))
r = next(r for r in s.regions if r.name == "clock_check")
abs_start = s.time_origin_ns + r.cpu_start_ns
print(f"clock check: region start on the trace clock - time.time_ns() before it = {(abs_start - c['before_region_ns']) / 1e3:.1f} us;"
      f" time.time_ns() inside it - region start = {(c['inside_region_ns'] - abs_start) / 1e3:.1f} us")
print("sampler:", json.dumps(s.collectors.get("sampler").to_dict()))
ts = [x.t_ns for x in s.samples]
gpm = [x.value("sm_activity_pct") for x in s.samples]
print(f"GPM sm_activity per sample: {[None if v is None else round(v) for v in gpm]}")
print(f"samples {len(ts)} ({sum(t < 0 for t in ts)} before the trace origin); first t {ts[0] / 1e6:.1f} ms, last t {ts[-1] / 1e6:.1f} ms; launches {len(s.launches)},"
      f" last kernel end {max(x.start_ns + x.duration_ns for x in s.launches) / 1e6:.1f} ms")
EOF
$KS show "$O/session_h100_samples.json" --top 1 --width 120 --no-color > "$O/show_samples.txt" 2>> "$LOG"

step "mixed workload at 50 ms"
$KS run -f --sample-interval 50 -o "$T/mixed.json" -- python3 tests/workloads/mixed.py >> "$LOG" 2>&1
python3 -c "
from kernelscope.model import Session; s = Session.load('$T/mixed.json')
print('mixed: samples', len(s.samples), s.collectors['sampler'].to_dict())" >> "$LOG" 2>&1

step "top"
$KS top --once --json > "$O/top.json" 2>> "$LOG"; echo "top --once --json rc=$?" >> "$LOG"
$KS top --once --width 120 --no-color > "$O/top.txt" 2>> "$LOG"; echo "top --once rc=$?" >> "$LOG"
python3 - >> "$LOG" 2>&1 <<'EOF'
# `top` on a pseudo-terminal: CPU per refresh over 20 refreshes, and a clean exit on 'q'.
import os, pty, resource, select, subprocess, sys, time
def run(argv, quit_after=None):
    m, s = pty.openpty()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=s, stdout=s, stderr=s, close_fds=True); os.close(s)
    out, sent = b"", False
    while p.poll() is None and time.monotonic() - t0 < 60:
        if select.select([m], [], [], 0.05)[0]:
            try: out += os.read(m, 1 << 16)
            except OSError: break
        if quit_after and not sent and time.monotonic() - t0 > quit_after:
            os.write(m, b"q"); sent = True; tq = time.monotonic()
    rc = p.wait(); os.close(m)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, cpu, time.monotonic() - t0, out, (time.monotonic() - tq if sent else None)
ks = [sys.executable, "-m", "kernelscope", "top", "--width", "120"]
rc0, cpu0, wall0, _, _ = run(ks + ["--once", "--interval", "250"])
rc, cpu, wall, out, _ = run(ks + ["--iterations", "21", "--interval", "250"])
print(f"top live: rc={rc}, 21 refreshes at 250 ms in {wall:.2f} s, CPU {cpu:.2f} s; --once CPU {cpu0:.2f} s (start-up);"
      f" CPU per refresh ~{(cpu - cpu0) / 20 * 1e3:.1f} ms -> {(cpu - cpu0) / (wall - wall0) * 100:.1f}% of one core")
rc, cpu, wall, out, q = run(ks + ["--interval", "250"], quit_after=2.0)
print(f"top quit with q: rc={rc}, left {q:.2f} s after the key, traceback={'Traceback' in out.decode(errors='replace')}")
EOF

step "NVML call latencies"
python3 - >> "$LOG" 2>&1 <<'EOF'
import time, pynvml as n
from kernelscope.collect.nvml import api as nvml_api
n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0)
def t(name, fn, k=200):
    fn(); t0 = time.perf_counter_ns()
    for _ in range(k): fn()
    print(f"  {name:<44} {(time.perf_counter_ns() - t0) / k / 1e3:9.1f} us")
t("nvmlDeviceGetUtilizationRates", lambda: n.nvmlDeviceGetUtilizationRates(h))
t("nvmlDeviceGetMemoryInfo", lambda: n.nvmlDeviceGetMemoryInfo(h))
t("nvmlDeviceGetClockInfo(SM)", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))
t("nvmlDeviceGetPowerUsage", lambda: n.nvmlDeviceGetPowerUsage(h))
t("nvmlDeviceGetTemperature", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))
t("nvmlDeviceGetCurrentClocksEventReasons", lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h))
t("nvmlDeviceGetPcieThroughput(TX) (legacy)", lambda: n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_TX_BYTES), 10)
g = nvml_api.GpmReader(n, h); print("  GPM:", g.reason or "supported")
if not g.reason:
    t("GPM sample + metrics query (GpmReader.read)", g.read, 50)
static = nvml_api.static_info(n, h)
t("whole sampler reading (snapshot, GPM)", lambda: nvml_api.snapshot(n, h, g, static), 50)
g.close(); n.nvmlShutdown()
EOF

step "overhead: interval 0 (off) / 50 / 10 ms, 3 rounds, interleaved; plus bare python"
for rep in 1 2 3; do
  for iv in 0 50 10; do
    $KS run -f -q --sample-interval $iv -o "$T/ov_${iv}_${rep}.json" -- python3 $W > "$T/ov_${iv}_${rep}.out" 2>> "$LOG"
  done
done
for rep in 1 2; do python3 $W > "$T/bare_${rep}.out" 2>> "$LOG"; done
python3 - "$T" "$O/overhead.json" >> "$LOG" 2>&1 <<'EOF'
import glob, json, os, statistics as st, sys
from kernelscope.model import Session
T, dst = sys.argv[1], sys.argv[2]
rows = {}
def steady(path):
    return json.loads(next(l for l in open(path) if l.startswith("STEADY "))[7:])
for out in sorted(glob.glob(f"{T}/ov_*.out")):
    iv, rep = os.path.basename(out)[3:-4].split("_")
    s = Session.load(out[:-4] + ".json"); d = s.collectors["sampler"].details
    rows.setdefault(iv, []).append({**steady(out), "samples": len(s.samples), "cpu_ms": d.get("sampler_thread_cpu_ms"),
                                    "read_ms_mean": d.get("read_ms_mean"), "read_ms_max": d.get("read_ms_max")})
rows["bare"] = [steady(p) for p in sorted(glob.glob(f"{T}/bare_*.out"))]
json.dump(rows, open(dst, "w"), indent=1)
def m(rs, k):
    v = [r[k] for r in rs if r.get(k) is not None]
    return f"{st.fmean(v):8.2f}" if v else "     N/A"
def sd(rs, k):
    v = [r[k] for r in rs if r.get(k) is not None]
    return f"{st.stdev(v):7.2f}" if len(v) > 1 else "    N/A"
print(f"{'interval':>9} {'runs':>4} {'gemm ms':>8} {'sd':>7} {'add ms':>8} {'sd':>7} {'TFLOP/s':>8} {'GB/s':>8} {'wall s':>8} {'samples':>8} {'thr CPU ms':>10} {'read ms':>8} {'read max':>8}")
for iv in ("bare", "0", "50", "10"):
    rs = rows.get(iv, [])
    print(f"{iv:>9} {len(rs):>4} {m(rs,'gemm_ms')} {sd(rs,'gemm_ms')} {m(rs,'copy_ms')} {sd(rs,'copy_ms')} {m(rs,'gemm_tflops')} {m(rs,'copy_gb_per_s')} {m(rs,'wall_s')}"
          f" {m(rs,'samples')} {m(rs,'cpu_ms'):>10} {m(rs,'read_ms_mean')} {m(rs,'read_ms_max')}")
EOF

step "gpu tests"
python3 -m pytest -q -m gpu tests/test_nvml_sampler.py >> "$LOG" 2>&1; echo "rc=$?" >> "$LOG"
gzip -9f "$O/session_h100_samples.json"
rm -rf "$T"
ls -la "$O" >> "$LOG"
sed -n '/== overhead/,/== gpu tests/p' "$LOG"
}

# Record the bundled W4A16 sessions on a GPU and run the Marlin GPU tests.
# From the repo root on a machine with an NVIDIA GPU, torch and triton:
#   OUT=/tmp/marlin bash scripts/record.sh marlin
# then gzip $OUT/{marlin,demo}_session_h100.json into src/kernelscope/data/.
target_marlin() {
set -u
O=${OUT:-/tmp/kernelscope-marlin}
mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="python3 -m kernelscope"
LOG=$O/record.log
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)  date: $(date -u +%F)" | tee "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$LOG"
step() { echo "== $*" | tee -a "$LOG"; }

step "learn marlin (m=16, k=n=8192), session -> marlin_session_h100.json"
$KS learn marlin -f -o "$O/marlin_session_h100.json" --width 120 --no-color > "$O/learn_marlin.txt" 2>> "$LOG"
echo "rc=$?" | tee -a "$LOG"
step "demo, session -> demo_session.json (gzip it into src/kernelscope/data/demo_session.json.gz)"
$KS demo -f -o "$O/demo_session.json" --width 120 --no-color > "$O/demo.txt" 2>> "$LOG"
echo "rc=$?" | tee -a "$LOG"
step "GPU tests"
if python3 -c "import pytest" 2>/dev/null; then
  python3 -m pytest -q -p no:cacheprovider tests/gpu/test_marlin_learn_gpu.py > "$O/pytest_gpu.txt" 2>&1
else  # no pytest on this machine: call the test functions directly
  python3 - > "$O/pytest_gpu.txt" 2>&1 <<'PY'
import importlib.util, pathlib, sys, tempfile, traceback
class _Stub:  # stands in for pytest's decorators and marks
    def __getattr__(self, name): return _Stub()
    def __call__(self, *a, **k): return _Stub()
sys.modules["pytest"] = _Stub()
sys.path.insert(0, "tests")
spec = importlib.util.spec_from_file_location("t", "tests/gpu/test_marlin_learn_gpu.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
failed = 0
for name in [n for n in dir(mod) if n.startswith("test_")]:
    try:
        getattr(mod, name)(pathlib.Path(tempfile.mkdtemp())); print("PASSED", name)
    except Exception:
        failed += 1; print("FAILED", name); traceback.print_exc()
sys.exit(1 if failed else 0)
PY
fi
echo "rc=$?" | tee -a "$LOG"
tail -5 "$O/pytest_gpu.txt"
step "summary"
sed -n '/The launch as measured/,/╰/p' "$O/learn_marlin.txt"
grep -E "^demo:" "$O/demo.txt"
ls -la "$O"
}

# GPU run of in-kernel instrumentation: the block recorder and Proton phase scopes.
# From the repo root on a GPU machine:  OUT=/tmp/inst bash scripts/record.sh instrumented
# Leaves at most 5 files in $OUT: record.log (tests + show output), two sessions and
# Proton's raw trace (gzipped). Clocks are never changed. Budget: about 240 s.
# Its sessions and Proton trace are in tests/data/ (tests/test_instrumented_sessions.py); the overhead it
# measures: benchmarks/results/RESULTS.md.
target_instrumented() {
set -u
O=${OUT:-/tmp/kernelscope-instrumented}
mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="timeout 120 python3 -m kernelscope"
L="$O/record.log"
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)  date: $(date -u +%F)" | tee "$L"
step() { echo "== $* ($(date +%T))" | tee -a "$L"; }

step "gpu tests: block recorder, proton scopes"
timeout 150 python3 -m pytest -q -s -x -m gpu tests/gpu/test_block_recorder_gpu.py tests/gpu/test_proton_scopes_gpu.py \
  2>&1 | tail -60 >> "$L"; echo "rc=${PIPESTATUS[0]}" >> "$L"
step "run: instrumented_example (block recorder)"
$KS run -f -o "$O/session_h100_instrumented.json" -- python3 tests/workloads/instrumented_example.py >> "$L" 2>&1
echo "rc=$?" >> "$L"
step "run: proton_phases (phase scopes)"
$KS run -f -o "$O/session_h100_proton.json" -- python3 tests/workloads/proton_phases.py \
  --keep-proton "$O/proton_h100_phases.chrome_trace" >> "$L" 2>&1
echo "rc=$?" >> "$L"
step "show: instrumented"
$KS show "$O/session_h100_instrumented.json" --kernel matmul_blocks --width 120 --no-color >> "$L" 2>&1; echo "rc=$?" >> "$L"
step "show: proton"
$KS show "$O/session_h100_proton.json" --kernel matmul_phases --width 120 --no-color >> "$L" 2>&1; echo "rc=$?" >> "$L"
step "export: proton"
$KS export "$O/session_h100_proton.json" --chrome /tmp/proton_export.json >> "$L" 2>&1; echo "rc=$?" >> "$L"
for f in "$O"/session_h100_instrumented.json "$O"/session_h100_proton.json "$O"/proton_h100_phases.chrome_trace; do
  [ -f "$f" ] && gzip -9f "$f"
done
step "done"
cat "$L"
}

# The memory, steps and marks fixtures on a GPU: a 200-step training loop under `run --steps 50-52 --memory` (session to $OUT),
# the --memory overhead (same loop plain, with --steps, with --steps --memory, twice each; and all 200 steps with
# and without --memory), --counters limited to the window, and the allocator snapshot fixture of tests/data/memory.
target_memory() {
set -u
export PYTHONPATH=$PWD/src:$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
pip install -q --no-index --find-links ../../.wheels rich >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
W=tests/data/memory/train_loop.py
K="python -m kernelscope run -q -f"
python tests/data/memory/record_snapshot.py "$OUT" 2>>"$OUT/log.txt"
for rep in 1 2; do
  echo "plain        rep$rep: $(python $W 2>>"$OUT/log.txt")"
  echo "steps        rep$rep: $($K -o /tmp/s$rep.json.gz --steps 50-52 -- python $W 2>>"$OUT/log.txt")"
  echo "steps+memory rep$rep: $($K -o /tmp/m$rep.json.gz --steps 50-52 --memory -- python $W 2>>"$OUT/log.txt")"
done
echo "trace all          : $($K -o /tmp/full.json.gz -- python $W 2>>"$OUT/log.txt")"
echo "trace all+memory   : $($K -o /tmp/fullm.json.gz --memory -- python $W 2>>"$OUT/log.txt")"
cp /tmp/m1.json.gz "$OUT/steps50-52_memory.json.gz"; cp /tmp/s1.json.gz "$OUT/steps50-52.json.gz"
timeout 170 python -m kernelscope run -f -o "$OUT/steps50-52_counters.json.gz" --steps 50-52 --counters --top 2 \
  --ncu-timeout 150 -- python $W 2>>"$OUT/log.txt" | sed 's/^/counters: /'
python - <<'PY'
import glob
from kernelscope.model import Session
from kernelscope.analyze.memory import memory_report
for p in sorted(glob.glob("/tmp/*.json.gz")) + sorted(glob.glob(__import__("os").environ["OUT"] + "/*counters.json.gz")):
    s = Session.load(p)
    r = memory_report(s)
    mem = "" if r is None else (getattr(r, "reason", None) or f"peak {r.peak_allocated_bytes} B, {r.events} events, "
                                f"snapshot {s.collectors['memory'].details.get('snapshot_s')} s")
    st = s.collectors.get("steps")
    print(f"{p.split('/')[-1]:34} launches {len(s.launches):6} regions {len(s.regions):5} marks {len(s.marks):4} "
          f"samples {len(s.samples):4} steps {st.details if st else '-'} {mem} counters "
          f"{s.collectors.get('counters').status if 'counters' in s.collectors else '-'}")
PY
ls -la "$OUT"
}

# Re-record the multi-GPU fixtures under tests/data/ranks (see its README).
# Run from the repo root on a machine with 2 NVIDIA GPUs (nvidia-h200-x2), torch and NCCL:
#   OUT=/tmp/ranks bash scripts/record.sh ranks
# then copy $OUT/ranks/* into tests/data/ranks/. Leaves the NCCL environment as found
# (NVLink multicast stays off: NCCL_NVLS_ENABLE=0 on the shared machines).
target_ranks() {
set -u
O=${OUT:-/tmp/kernelscope-ranks}
R=$O/ranks
mkdir -p "$R" /tmp/ks-ranks
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
TR="python3 -m torch.distributed.run"
W=tests/workloads/ddp_straggler.py
LOG=$O/record_ranks.log
{ echo "date: $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv;
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())';
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)' | sort; } > "$LOG" 2>&1

echo "== one job, 2 ranks on one host (torch.profiler per rank)" | tee -a "$LOG"
rm -rf /tmp/ks-ranks/job && $TR --nproc-per-node 2 --master-port 29511 $W --trace-dir /tmp/ks-ranks/job >> "$LOG" 2>&1
echo "rc=$?" >> "$LOG"
i=0; for f in /tmp/ks-ranks/job/*.pt.trace.json.gz; do cp "$f" "$R/job2_rank$i.pt.trace.json.gz"; i=$((i+1)); done

echo "== two torchrun 'nodes' on one host (--nnodes 2 --node-rank), one GPU each" | tee -a "$LOG"
rm -rf /tmp/ks-ranks/node0 /tmp/ks-ranks/node1
for n in 0 1; do
  CUDA_VISIBLE_DEVICES=$n $TR --nnodes 2 --node-rank $n --nproc-per-node 1 --master-addr 127.0.0.1 \
    --master-port 29512 $W --trace-dir /tmp/ks-ranks/node$n >> "$LOG" 2>&1 &
done
wait; echo "rc=$?" >> "$LOG"
for n in 0 1; do cp /tmp/ks-ranks/node$n/*.pt.trace.json.gz "$R/node${n}_rank$n.pt.trace.json.gz"; done
ls -la "$R" >> "$LOG"
}

# End-to-end check of multi-GPU recording on a 2-GPU machine (nvidia-h200-x2); writes under $OUT:
# the fixtures (record.sh ranks), a `kernelscope run -- torchrun` session and its show output, the
# multigpu test log, and the cost of the trace pass per rank (torchrun, 2 ranks) against one GPU.
target_check_ranks() {
set -u
O=${OUT:-/tmp/kernelscope-ranks}; mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="python3 -m kernelscope"; W=tests/workloads/ddp_straggler.py; L=$O/check.log
OUT=$O bash scripts/record.sh ranks
$KS import "$O"/ranks/job2_rank*.pt.trace.json.gz -o "$O/job2.json" -f >> "$L" 2>&1
$KS show "$O/job2.json" --width 150 --panels 0 > "$O/show_job2.txt" 2>> "$L"
$KS run -f -o "$O/run2.json" -- torchrun --nproc-per-node 2 --master-port 29551 $W --steps 5 >> "$L" 2>&1; echo "run rc=$?" >> "$L"
$KS show "$O/run2.json" --width 150 --panels 0 > "$O/show_run2.txt" 2>> "$L"
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_ranks_gpu.py > "$O/multigpu_tests.log" 2>&1; echo "pytest rc=$?" >> "$L"
# cost: the workload's own time (steps only) and the whole command's wall time, plain vs under kernelscope
t() { local s=$(date +%s.%N); "$@" > "$O/t.out" 2>&1; local e=$(date +%s.%N); echo "$(python3 -c "print(round($e - $s, 2))") $(grep -o 'in [0-9.]* s' "$O/t.out" | tr '\n' ' ')"; }
for n in 1 2; do
  for i in 1; do
    echo "nproc=$n plain:       $(t torchrun --nproc-per-node $n --master-port 2956$n $W --steps 20)" >> "$L"
    echo "nproc=$n kernelscope: $(t $KS run -f -q -o /tmp/c$n.json -- torchrun --nproc-per-node $n --master-port 2957$n $W --steps 20)" >> "$L"
  done
done
rm -f "$O/t.out" "$O/job2.json"
for f in record_ranks.log show_job2.txt show_run2.txt multigpu_tests.log; do echo "=== $f"; cat "$O/$f"; rm -f "$O/$f"; done >> "$L"
gzip -f "$O/run2.json"
}

TARGETS="fixtures counters analysis gpu_stats marlin instrumented memory ranks"
case "${1:-}" in
  all) shift; for t in $TARGETS; do echo "=== record.sh $t"; ( "target_$t" ); done ;;
  fixtures|counters|analysis|gpu_stats|marlin|instrumented|memory|ranks|check_ranks) t=$1; shift; "target_$t" "$@" ;;
  *) echo "usage: bash scripts/record.sh fixtures|counters|analysis|gpu_stats|marlin|instrumented|memory|ranks|check_ranks|all [ARGS]" >&2; exit 2 ;;
esac
