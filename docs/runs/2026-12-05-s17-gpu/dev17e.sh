#!/usr/bin/env bash
# session 17: AOT sums warps A/B (both built here for sm_90): the new per-tile warps against 8 for every tile
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
bash bench/gpu_suite.sh build 2>&1 | tail -2 &
sed 's/FACTOR_WARPS\[_bc\])/8)/' src/optim/triton/build_triton_aot.py > src/optim/triton/build_triton_aot_w8.py
timeout 200 python3 src/optim/triton/build_triton_aot.py --out $PWD/aot_new --targets sm_90 --kernels all > "$OUT/aot_new.log" 2>&1 &
timeout 200 python3 src/optim/triton/build_triton_aot_w8.py --out $PWD/aot_w8 --targets sm_90 --kernels all > "$OUT/aot_w8.log" 2>&1
wait; echo "built at $(( $(date +%s) - t0 )) s"
grep -o '"luminav_triton_factor_sums_gf32_128x128"[^}]*' aot_new/cuda/manifest.json | head -c 300; echo
for p in 1 2; do
  for a in aot_w8 aot_new; do
    LUMINAV_TRITON_AOT_DIR=$PWD/$a PYTHONPATH=/tmp/lm_site timeout 100 python3 bench/triton_step_bench.py --reps 30 --skip-compile \
      --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 tdclm_tensor_f32 clm_f32 \
      --kinds luminav_step_triton_aot 2>&1 | sed "s/^/run$p $a /" | tee -a "$OUT/aot_ab.log" | grep -E "ms" | tail -6
  done
done
echo "done at $(( $(date +%s) - t0 )) s"
