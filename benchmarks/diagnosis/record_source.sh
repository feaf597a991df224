#!/usr/bin/env bash
# Record the source-level counter reports (Nsight Compute's SourceCounters and WarpStateStats sections with the
# source imported, plus the sections and metrics of kernelscope's own counter pass, so the kernel rules fire on
# the imported report) of every defect-suite case with a location, defect and fixed, on a GPU machine with ncu
# and nvcc (no network, no pip install: PYTHONPATH=src):
#   OUT=/tmp/src bash benchmarks/diagnosis/record_source.sh
# Records, one launch each (--launch-count 1, inside the case's kernelscope.region NVTX range):
#   * CASE_VARIANT for the uncoalesced, bank-conflict, local-memory, divergence and FMA-matmul cases of both halves;
#   * bank_conflicts_defect_nolineinfo: the CUDA library built without -lineinfo (KS_DIAG_NO_LINEINFO=1);
#   * w4a16_learn: the shipped W4A16 GEMM as `kernelscope learn marlin` runs it (the demo plan, one launch of
#     the kernel inside the w4a16_gemm region of python -m kernelscope.kernels.marlin.workload).
# Writes 3 files to $OUT: source_reports.tar (every report, xz-compressed), cost.txt (wall time of each ncu run,
# and of one case with the targeted sections only against the source sections added) and record.log.
# ONLY=REGEX records only the reports whose name matches (e.g. ONLY=w4a16 re-records the learn launch alone).
# Stops starting new runs after $BUDGET_S seconds (default 420) so the whole run stays under 8 minutes; what was
# skipped is in record.log. Back on a checkout: tar -xf $OUT/source_reports.tar -C tests/data/source.
# Never changes clocks (--clock-control none).
set -u
O=${OUT:?set OUT}; W=/tmp/ks_source; rm -rf "$W"; mkdir -p "$O" "$W/reports"
BUDGET_S=${BUDGET_S:-420}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH} KS_DIAG_BUILD_DIR=$W/build
export KERNELSCOPE_CACHE_DIR=$W/cache
T0=$(date +%s)
LOG=$O/record.log; COST=$O/cost.txt; : > "$LOG"; : > "$COST"
# the sections and metrics `kernelscope run --counters --source` asks for on this GPU's architecture
mapfile -t PASS < <(python3 - <<'PY'
import torch
from kernelscope.collect.ncu.fields import EXTRA_METRICS, SECTIONS, SOURCE_SECTIONS
import os
arch = os.environ.get("KS_ARCH") or "sm_%d%d" % torch.cuda.get_device_capability()  # KS_ARCH: a dry run
for s in dict.fromkeys(SECTIONS + SOURCE_SECTIONS):
    print("--section"); print(s)
extra = EXTRA_METRICS.get(arch, ())
if extra:
    print("--metrics"); print(",".join(extra))
PY
)
TARGETED=(); for ((i = 0; i < ${#PASS[@]}; i++)); do  # the same pass without the source sections
  if [ "${PASS[$i]}" = --section ] && { [ "${PASS[$((i+1))]}" = SourceCounters ]; }; then i=$((i+1)); continue; fi
  TARGETED+=("${PASS[$i]}")
done
over() { [ $(( $(date +%s) - T0 )) -ge "$BUDGET_S" ]; }
rec() {  # name region kernel-regex import-source(yes|no) sections... -- command...
  local name=$1 region=$2 kre=$3 imp=$4; shift 4
  local args=(); while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return; fi
  if over; then echo "$name SKIPPED (past ${BUDGET_S} s)" | tee -a "$LOG"; return; fi
  local t0 t1 rc
  t0=$(date +%s.%N)
  local kfilter=(); [ -n "$kre" ] && kfilter=(--kernel-name-base function --kernel-name "regex:$kre")
  timeout 150 ncu --clock-control none --import-source "$imp" --nvtx --nvtx-include "$region/" "${kfilter[@]}" \
    --launch-count 1 "${args[@]}" -f -o "$W/reports/$name" "$@" > "$W/$name.log" 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "$name rc=$rc $(python3 -c "print(f'{$t1 - $t0:.1f}')") s: $(grep -v '^==PROF==' "$W/$name.log" | tail -1)" \
    | tee -a "$LOG" >> "$COST"
  [ $rc -ne 0 ] && tail -5 "$W/$name.log" >> "$LOG"
}
case_() { rec "${1}_${2}" "$1" "" yes "${PASS[@]}" -- python3 benchmarks/diagnosis/suite/run_case.py "$1" "$2" --repeats 1; }
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "== ncu: $(ncu --version | tail -1); nvcc: $(nvcc --version | tail -1)"
} | tee -a "$LOG" > "$COST"
CASES="uncoalesced uncoalesced_bf16_transpose bank_conflicts bank_conflicts_wide_tile local_memory local_memory_k16
       divergence divergence_lane4 fma_matmul fma_matmul_fp32 fma_matmul_fp16_rect"
for c in $CASES; do case_ "$c" defect; done
rec w4a16_learn w4a16_gemm w4a16 yes "${PASS[@]}" -- python3 -m kernelscope.kernels.marlin.workload
( export KS_DIAG_NO_LINEINFO=1 KS_DIAG_BUILD_DIR=$W/build_nolineinfo
  rec bank_conflicts_defect_nolineinfo bank_conflicts "" yes "${PASS[@]}" -- \
    python3 benchmarks/diagnosis/suite/run_case.py bank_conflicts defect --repeats 1 )
for c in $CASES; do case_ "$c" fixed; done
# the cost of the source sections: one case with kernelscope's targeted pass, then with the source sections added
echo "-- cost of the source sections (uncoalesced defect, one launch, whole process):" >> "$COST"
rec cost_targeted uncoalesced "" no "${TARGETED[@]}" -- \
  python3 benchmarks/diagnosis/suite/run_case.py uncoalesced defect --repeats 1
rec cost_source uncoalesced "" yes "${PASS[@]}" -- \
  python3 benchmarks/diagnosis/suite/run_case.py uncoalesced defect --repeats 1
rm -f "$W/reports/cost_targeted.ncu-rep" "$W/reports/cost_source.ncu-rep"
for f in "$W"/reports/*.ncu-rep; do [ -e "$f" ] && xz -9 "$f"; done
tar -cf "$O/source_reports.tar" -C "$W/reports" .
echo "== done in $(( $(date +%s) - T0 )) s; $(ls "$W"/reports | wc -l) reports" | tee -a "$LOG"
ls -la "$W/reports" >> "$LOG"
cat "$COST"
