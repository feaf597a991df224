#!/bin/bash
# The memory, steps and marks fixtures on a GPU: a 200-step training loop under `run --steps 50-52 --memory` (session to $OUT),
# the --memory overhead (same loop plain, with --steps, with --steps --memory, twice each; and all 200 steps with
# and without --memory), --counters limited to the window, and the allocator snapshot fixture of tests/data/memory.
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
