"""Started by Python in every process of a `kernelscope run -- torchrun ...` job (this directory is put
first on PYTHONPATH). In a rank (RANK set by torchrun) it starts kernelscope's trace pass, which writes
the rank's own session into $KERNELSCOPE_RANK_DIR at exit; in the counter pass ($KERNELSCOPE_NCU_RANK_SPEC)
a chosen rank runs its own command line under ncu instead (collect/ncu/rank_counters.py) and never
returns here; anywhere else it does nothing."""
import os

if (
    os.environ.get("KERNELSCOPE_NCU_RANK_SPEC")
    and os.environ.get("RANK")
    and not os.environ.get("KERNELSCOPE_NCU_WRAPPED")
):
    try:
        from kernelscope.collect.ncu.rank_counters import profile_this_rank

        profile_this_rank()  # exits with ncu's exit code in a chosen rank; returns in the others
    except Exception as e:  # the rank runs unprofiled; the parent says that its counter pass left no result
        import sys

        print(
            f"kernelscope: warning: rank {os.environ.get('RANK')}: the counter pass did not start ({e})",
            file=sys.stderr,
        )

if os.environ.get("KERNELSCOPE_RANK_DIR") and os.environ.get("RANK") and not os.environ.get("KERNELSCOPE_RANK_HOOKED"):
    try:
        from kernelscope.collect.trace.rank_record import start_rank_trace

        start_rank_trace()
    except Exception as e:  # never stop the workload: the parent says which rank left no trace
        import sys

        print(
            f"kernelscope: warning: rank {os.environ.get('RANK')}: the trace pass did not start ({e})", file=sys.stderr
        )
