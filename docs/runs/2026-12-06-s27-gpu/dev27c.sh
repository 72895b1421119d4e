#!/bin/bash
# Session 27, call 3 (the same warm H200, right after call 2, whose Triton phase failed: the package's libraries
# need the bundle's libsimdjson on LD_LIBRARY_PATH, which gpu_suite.sh sets and a direct call did not): issue 18's
# Triton JIT and nvcc kernels at 2^28, eager and replayed, with the first step's compile time.
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name --format=csv
PYTHONPATH=/tmp/lm_site timeout 200 python3 bench/triton_step_bench.py --reps 30 --replay \
  --cases tdclm_factored_f32 tdclm_factored_bf16_master clm_f32 --kinds luminav_nvcc luminav_triton torch_fused_adamw \
  --out "$OUT/triton_step.json" 2>&1 | tee "$OUT/triton_step.log" | tail -40
