"""In-kernel instrumentation, opt-in: a block recorder that has each program / thread
block write the SM it ran on (%smid) and its start and end time (%globaltimer).

- ``layout``: the block record layout (shared with kernelscope/include/kernelscope.cuh).
- ``reader``: buffer -> model.BlockRecords, with validation (pure; no GPU needed).
- ``triton_blocks``: the @triton.jit helpers a kernel calls (imports triton).
- ``recorder``: the host side: a zeroed buffer, read back after the launch (imports torch).
- ``sink``: hands records to the session and attaches them to their launch.
- ``proton_scopes`` / ``proton_trace`` / ``scope_sink``: phase scopes with Triton Proton's
  instrumentation backend (imports triton when used), its trace file -> PhaseScopes (pure),
  and attaching them to their launch.
- ``cuda_scopes``: CUDA C++ kernels instrumented with kernelscope.cuh (block records and warp
  phase scopes): their buffers (torch or cupy), read back (pure) and handed to the same sinks.

tests/gpu/test_block_recorder_gpu.py and tests/gpu/test_proton_scopes_gpu.py check them on a GPU,
and the recorded sessions in tests/data/ (scripts/record.sh instrumented) are tested without one;
the W4A16 kernel records its programs with ``w4a16_matmul(..., recorder=)``, the Gluon decode kernel
too (a Gluon ``LaunchConfig``: kernels/marlin/gluon_kernel.py writes the same rows in Gluon).
"""
