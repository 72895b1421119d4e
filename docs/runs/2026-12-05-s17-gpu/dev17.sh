#!/usr/bin/env bash
# session 17's one device call: build, the Triton/AOT/nvcc kernels at 2^28, the Llama 98M loop
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/card.txt"
bash bench/gpu_suite.sh build 2>&1 | tail -5
echo "built at $(( $(date +%s) - t0 )) s"
export LUMINAV_TRITON_AOT_DIR=$PWD/aot
for p in 1 2; do
  PYTHONPATH=/tmp/lm_site timeout 150 python3 bench/triton_step_bench.py --reps 30 --skip-compile --replay \
    --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 tdclm_tensor_f32 clm_f32 clm_bf16_master \
    --kinds luminav_nvcc luminav_triton luminav_step_triton_aot luminav_step_nvcc torch_fused_adamw 2>&1 | sed "s/^/run$p /" \
    | tee -a "$OUT/triton_vs_nvcc.log" | grep -E "copy|ms" | tail -40
  echo "kernels $p at $(( $(date +%s) - t0 )) s"
done
LOOP_TIMEOUT=$(( 560 - ($(date +%s) - t0) )) LOOP_ARGS="--kinds torch_fused luminav luminav_triton luminav_tdclm luminav_tdclm_triton --rounds 3 --reps 20" \
  bash bench/gpu_suite.sh loop 2>&1 | tail -30
echo "done at $(( $(date +%s) - t0 )) s"
