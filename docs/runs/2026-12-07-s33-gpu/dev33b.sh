#!/bin/bash
# Session 33, call 2: issue 18's whole benchmark on main (bf85385) in one run, on whichever card comes:
# 1. the kernel benchmark at 2^28, every case (CLM fp32, CLM bf16 + masters, TD-CLM factored fp32 and bf16 +
#    masters, TD-CLM row and tensor fp32) for the nvcc kernels, the Triton JIT, the Triton AOT kernels and torch's
#    fused AdamW, eager and replayed, with the JIT's first-step compile time (empty cache, then reused);
# 2. the Llama 98M loop: torch fused, TD-CLM on nvcc, the Triton JIT and the Triton AOT kernels.
# Carry build/aot_s33 (or the set named by AOT=...), .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/${AOT:-build/aot_s33} PYTHONPATH=/tmp/lm_site
timeout 330 python3 bench/triton_step_bench.py --reps 30 --replay \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|first step|Error|captured"
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
timeout $(( 580 - $(date +%s) + t0 )) python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm \
  luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 2 --reps 20 --json "$OUT/loop.json" 2>&1 \
  | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
echo "all done at $(( $(date +%s) - t0 )) s"
