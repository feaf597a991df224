"""Started by Python in every process of a `kernelscope run -- torchrun ...` job (this directory is put
first on PYTHONPATH). In a rank (RANK set by torchrun) it starts kernelscope's trace pass, which writes
the rank's own session into $KERNELSCOPE_RANK_DIR at exit; anywhere else it does nothing."""
import os

if os.environ.get("KERNELSCOPE_RANK_DIR") and os.environ.get("RANK") and not os.environ.get("KERNELSCOPE_RANK_HOOKED"):
    try:
        from kernelscope.collect.trace.rank_record import start_rank_trace

        start_rank_trace()
    except Exception as e:  # never stop the workload: the parent says which rank left no trace
        import sys

        print(f"kernelscope: warning: rank {os.environ.get('RANK')}: the trace pass did not start ({e})", file=sys.stderr)
