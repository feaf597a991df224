#!/usr/bin/env bash
# Calibrate kernelscope's diagnosis against the defect suite (issue 14), on a GPU machine
# with ncu and nvcc on PATH (no network needed, no pip install: PYTHONPATH=src):
#   OUT=/tmp/out bash benchmarks/diagnosis/record.sh [--cases a,b] [--repeats N]
# Writes to $OUT (6 files): diagnosis_table.json, diagnosis_table.md, diagnosis_sessions.tar.gz
# (sessions trimmed to each case's kernels, run logs, timings), diagnosis_ncu_reports.tar.gz
# (when under 15 MiB), ceilings.json (kernelscope calibrate), calibrate.log.
# Back on a checkout, put the results where they are checked in:
#   bash benchmarks/diagnosis/record.sh install $OUT
# (sessions -> tests/data/diagnosis/, table and ceilings -> benchmarks/diagnosis/).
# Never changes clocks (--clock-control none).
set -u
if [ "${1:-}" = install ]; then
  S=${2:?usage: record_diagnosis.sh install OUTDIR}
  mkdir -p tests/data/diagnosis
  tar -xzf "$S/diagnosis_sessions.tar.gz" -C tests/data/diagnosis --strip-components=1 sessions
  tar -xzf "$S/diagnosis_sessions.tar.gz" -C tests/data/diagnosis timings.json
  cp "$S/diagnosis_table.json" "$S/diagnosis_table.md" benchmarks/diagnosis/
  [ -f "$S/ceilings.json" ] && cp "$S/ceilings.json" tests/data/diagnosis/ceilings.json
  ls -la tests/data/diagnosis benchmarks/diagnosis/diagnosis_table.*
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
