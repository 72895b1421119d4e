#!/usr/bin/env bash
# session 20, call 1 (from the repository root; scripts of this folder copied there, .gpu_bundle carried):
# main's build, the Llama 98M loop with all six kinds and paired windows, the launch probe, the GPU suites.
# (As it ran, the call had the suite's build, loop and tests phases inline, with the same flags and arguments.)
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
LOOP_ARGS="--kinds torch_fused torch_fused_capturable luminav luminav_tdclm luminav_triton luminav_tdclm_triton \
--rounds 5 --reps 20 --paired-windows 40 --paired-steps 5" LOOP_TIMEOUT=330 bash bench/gpu_suite.sh build loop
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
PYTHONPATH=/tmp/lm_site:bench timeout 120 python3 dev20_probe.py torch_fused luminav luminav_tdclm 2>&1 \
  | grep -v Warn > $OUT/probe.log
GPU_TESTS="tests/optim/test_gpu_cuda.py tests/optim/test_gpu_async_step.py tests/optim/test_gpu_step_graph.py" \
  bash bench/gpu_suite.sh tests
