#!/usr/bin/env bash
# Record the bundled W4A16 sessions on a GPU and run the Marlin GPU tests.
# From the repo root on a machine with an NVIDIA GPU, torch and triton:
#   OUT=/tmp/marlin bash scripts/record_marlin.sh
# then gzip $OUT/{marlin,demo}_session_h100.json into src/kernelscope/data/.
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
