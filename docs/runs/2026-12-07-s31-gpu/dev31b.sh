#!/bin/bash
# Session 31, call 2: dev31a.sh again (the GPU tests now include the two-captures and capture-refusal tests), then
# on an H200 issue 18's kernel benchmark in one run: nvcc, Triton JIT, Triton AOT and torch's fused AdamW at 2^28
# (CLM fp32, TD-CLM factored fp32 and bf16 + masters; eager and replayed).
set -u
export OUT=${OUT:-$PWD/gpu_out}
bash docs/runs/2026-12-07-s31-gpu/dev31a.sh
if grep -q H200 "$OUT/gpu.txt"; then
  LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s31 \
    PYTHONPATH=/tmp/lm_site timeout 150 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
    --cases clm_f32 tdclm_factored_f32 tdclm_factored_bf16_master \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
    | tee "$OUT/kernel_bench.log" | grep -E "copy|Error|captured"
fi
