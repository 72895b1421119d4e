#!/bin/bash
# Session 35: on any card, aot_eager_trace.py (why the AOT step's eager GPU time in the loop exceeds its replay);
# on an H200 first, issue 18's tests and benchmark in one call on main (calls 1-3 ran them on an H100): 1. test_gpu_triton_aot.py (the C-program test included) and the other
# optimizer GPU suites; 2. the kernel benchmark at 2^28, every case, nvcc / Triton JIT / Triton AOT / torch fused
# AdamW, eager and replayed, with the JIT's first-step compile time; 3. the Llama 98M loop (torch fused, TD-CLM on
# nvcc, the Triton JIT and AOT kernels), five rounds. Carry .gpu_bundle, build/aot_s35m.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s35m PYTHONPATH=/tmp/lm_site
trace() { timeout 150 python3 docs/runs/2026-12-07-s35-gpu/aot_eager_trace.py 2>&1 | grep -v -i warn \
  | tee "$OUT/aot_eager_trace.log"; }
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: the trace only"; trace; exit 0; }
GPU_TESTS="tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_async_step.py tests/optim/test_gpu_step_graph.py
  tests/optim/test_optim_cuda_frontend.py tests/optim/test_gpu_torch.py tests/optim/test_gpu_cuda.py
  tests/optim/test_gpu_triton.py tests/optim/test_gpu_sharded.py" bash bench/gpu_suite.sh tests 2>&1 | tail -1
echo "tests done at $(( $(date +%s) - t0 )) s"
timeout 200 python3 bench/triton_step_bench.py --reps 30 --replay \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|first step|Error|captured"
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
timeout $(( 480 - $(date +%s) + t0 )) python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm \
  luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 5 --reps 20 --json "$OUT/loop.json" 2>&1 \
  | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
[ $(( 580 - $(date +%s) + t0 )) -gt 100 ] && trace
echo "all done at $(( $(date +%s) - t0 )) s"
