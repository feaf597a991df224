#!/usr/bin/env bash
# Calibrate kernelscope's diagnosis against the defect suite (issue 14), on a GPU machine
# with ncu and nvcc on PATH (no network needed, no pip install: PYTHONPATH=src):
#   OUT=/tmp/out bash benchmarks/diagnosis/record.sh [--half tuning|check|all] [--cases a,b] [--repeats N]
# (default: the tuning half; --half check: the issue-35 check half; --cases: a subset, within --half if given)
# Writes to $OUT (6 files): diagnosis_table.json, diagnosis_table.md, diagnosis_sessions.tar.gz
# (sessions trimmed to each case's kernels, run logs, timings), diagnosis_ncu_reports.tar.gz
# (when under 15 MiB), ceilings.json (kernelscope calibrate), calibrate.log.
# Back on a checkout, put the results where they are checked in:
#   bash benchmarks/diagnosis/record.sh install $OUT
# (sessions -> tests/data/diagnosis/, timings merged into tests/data/diagnosis/timings.json, the table ->
# benchmarks/diagnosis/diagnosis_table.* and ceilings -> tests/data/diagnosis/ceilings.json; a check-half-only
# run goes to diagnosis_table_check.* and ceilings_check.json instead). The check half takes two GPU commands
# (README); after installing both, re-score it in one table with table.py --half check.
# Never changes clocks (--clock-control none).
set -u
if [ "${1:-}" = install ]; then
  S=${2:?usage: record.sh install OUTDIR}
  mkdir -p tests/data/diagnosis
  tar -xzf "$S/diagnosis_sessions.tar.gz" -C tests/data/diagnosis --strip-components=1 sessions
  # timings are merged into the checked-in file (a run of one half or a few cases keeps the others' timings)
  T=$(mktemp -d); tar -xzf "$S/diagnosis_sessions.tar.gz" -C "$T" timings.json
  python3 - "$T/timings.json" tests/data/diagnosis/timings.json <<'PY'
import json, os, sys
new, dst = json.load(open(sys.argv[1])), sys.argv[2]
old = json.load(open(dst)) if os.path.exists(dst) else {}
old.update(new)
json.dump(old, open(dst, "w"), indent=1)
print(f"timings: {len(new)} cases merged into {dst} ({len(old)} in all)")
PY
  rm -rf "$T"
  # a table of the check half alone goes to diagnosis_table_check.*, beside the tuning half's table
  SUF=$(python3 -c "import json,sys; h=set(json.load(open(sys.argv[1])).get('scores_by_half',{})); print('_check' if h=={'check'} else '')" "$S/diagnosis_table.json")
  cp "$S/diagnosis_table.json" "benchmarks/diagnosis/diagnosis_table$SUF.json"
  cp "$S/diagnosis_table.md" "benchmarks/diagnosis/diagnosis_table$SUF.md"
  # the check half keeps its own run's ceilings (the tuning half's sessions are scored with theirs)
  [ -f "$S/ceilings.json" ] && cp "$S/ceilings.json" "tests/data/diagnosis/ceilings$SUF.json"
  ls -la tests/data/diagnosis benchmarks/diagnosis/diagnosis_table*
  exit 0
fi
O=${OUT:-/tmp/kernelscope-diagnosis}; W=/tmp/ks_diagnosis; rm -rf "$W"; mkdir -p "$O" "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
export KERNELSCOPE_CACHE_DIR=$W/cache KS_DIAG_BUILD_DIR=$W/build
if [ -d .whl ]; then  # the ncu_report reader CI uses (PyPI ncu-report), carried as a wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "== ncu: $(ncu --version 2>&1 | tail -1); nvcc: $(nvcc --version 2>&1 | tail -1)"
  echo "== kernelscope calibrate (measured ceilings for % of peak and far-from-bandwidth)"
  python3 -m kernelscope calibrate --force 2>&1 | tail -8
  cp "$W"/cache/ceilings-*.json "$O/ceilings.json" 2>/dev/null || echo "no ceilings cached: the table uses ncu's peaks"
  python3 benchmarks/diagnosis/calibrate.py --out "$O" --work "$W" "$@"
  echo "calibrate.py rc=$?"
} 2>&1 | tee "$O/calibrate.log"
ls -la "$O"
