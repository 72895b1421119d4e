#!/bin/bash
# Session 24, call 6: the update round of the CUDA step reads the parameters only for the tensor bound
# (kReduceWeights): the cautious mask's extra pass reads g and m (and CLM's v), not x. The CUDA GPU
# suites, then the Llama 98M loop as call 5 (3 rounds of 10 steps) to measure the cautious step again.
set -u
export OUT=${OUT:-$PWD/gpu_out}
GPU_TESTS="tests/optim/test_gpu_cuda.py tests/optim/test_gpu_async_step.py tests/optim/test_gpu_step_graph.py tests/optim/test_gpu_torch.py tests/optim/test_optim_cuda_frontend.py" \
LOOP_TIMEOUT=120 LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_cautious --rounds 3 --reps 10" \
  bash bench/gpu_suite.sh build tests loop
