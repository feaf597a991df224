#!/usr/bin/env bash
# Re-record the source-level counter fixtures (Nsight Compute's SourceCounters and WarpStateStats sections with the
# source imported) of a few defect-suite kernels, on a GPU machine with ncu and nvcc:
#   OUT=/tmp/src bash benchmarks/diagnosis/record_source.sh
# Writes $OUT/CASE_VARIANT.ncu-rep.xz (one launch of the case's kernel, inside its kernelscope.region NVTX range)
# and $OUT/cost.txt: the wall time of ncu on one case with the targeted sections only and with the source sections
# added. Back on a checkout: cp $OUT/*.ncu-rep.xz tests/data/source/. Never changes clocks (--clock-control none).
set -u
O=${OUT:?set OUT}; W=/tmp/ks_source; rm -rf "$W"; mkdir -p "$O" "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD KS_DIAG_BUILD_DIR=$W/build
SRC=(--section SourceCounters --section WarpStateStats --import-source yes)
rec() {  # case variant [extra ncu args]
  local c=$1 v=$2; shift 2
  ncu --clock-control none --nvtx --nvtx-include "$c/" --launch-count 1 "$@" -f -o "$W/${c}_${v}" \
    python3 benchmarks/diagnosis/suite/run_case.py "$c" "$v" --repeats 1 > "$W/${c}_${v}.log" 2>&1
  echo "$c $v rc=$? $(tail -1 "$W/${c}_${v}.log")"
}
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(ncu --version | tail -1)"
for cv in "uncoalesced defect" "uncoalesced fixed" "bank_conflicts defect" "bank_conflicts fixed" \
          "fma_matmul defect" "local_memory defect"; do
  rec $cv "${SRC[@]}" --section SpeedOfLight
done
{
  for run in 1 2; do
    t0=$(date +%s.%N); rec uncoalesced defect --section SpeedOfLight --section MemoryWorkloadAnalysis >/dev/null
    t1=$(date +%s.%N); rec uncoalesced defect "${SRC[@]}" --section SpeedOfLight --section MemoryWorkloadAnalysis >/dev/null
    t2=$(date +%s.%N)
    python3 -c "print(f'run $run: targeted {$t1 - $t0:.1f} s, with source sections {$t2 - $t1:.1f} s (uncoalesced defect, one launch, whole process)')"
  done
} > "$O/cost.txt"
cat "$O/cost.txt"
for f in "$W"/*.ncu-rep; do xz -9 -c "$f" > "$O/$(basename "$f").xz"; done
ls -la "$O"
