#!/usr/bin/env bash
# Record the live-sampler fixture and measure what sampling costs, on a GPU machine:
#   OUT=/tmp/gpu_stats bash scripts/record_gpu_stats.sh
# Writes under $OUT: session_h100_samples.json.gz (-> tests/data/), show_samples.txt,
# top.json, top.txt, overhead.json and record.log (the measurements, table last).
# Never changes clocks or any GPU setting.
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
