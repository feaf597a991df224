#!/bin/bash
# Issue 17, the fifth session's final W4A16 measurement (2026-11-23): issue17_gpu5.sh (first-use tuning from an
# empty cache, then 3 benchmark runs on it) with the Gluon decode kernel among the tuner's candidates at m <= 16 on
# sm_90, and the Gluon kernel on its own layout benchmarked beside. One device call.
# Usage: OUT=dir bash benchmarks/w4a16/issue17_gpu7.sh (the recorded run had the same steps inline, with 130 s
# and 140 s time limits for the tuning and each run)
IMPLS=w4a16,w4a16-gluon,cublas,tinygemm KERNELS=w4a16,w4a16-gluon exec bash "$(dirname "$0")/issue17_gpu5.sh"
