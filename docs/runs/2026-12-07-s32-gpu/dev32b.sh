#!/bin/bash
# Session 32, call 2 (any card): where the loop's step time goes now (torch.profiler, nvcc / JIT / AOT), the new
# factor kernels' warps (8) against the old (4, AOT set build/aot_s31) in the profile; then the multi-tensor
# factor sums' warps in the loop (LUMINAV_TRITON_FACTOR_WARPS=2, 4, default 8; the JIT), alternating.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32 PYTHONPATH=/tmp/lm_site
timeout 90 python3 docs/runs/2026-12-07-s30-gpu/profile_aot_step.py 2>&1 | tee "$OUT/profile_new.log" | tail -30
env LUMINAV_TRITON_FACTOR_FORM_WARPS=4 LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s31 timeout 90 python3 \
  docs/runs/2026-12-07-s30-gpu/profile_aot_step.py luminav_tdclm_triton luminav_tdclm_triton_aot 2>&1 \
  | tee "$OUT/profile_old.log" | tail -20
echo "profiles done at $(( $(date +%s) - t0 )) s"
for run in 2:1 4:1 8:1 2:2 4:2 8:2; do
  w=${run%%:*}
  env LUMINAV_TRITON_FACTOR_WARPS=$w timeout 60 python3 bench/optim_training_loop.py --kinds luminav_tdclm \
    luminav_tdclm_triton --rounds 1 --reps 20 --json "$OUT/sums_w${run/:/_}.json" 2>&1 | sed "s/^/w$run /" \
    | tee -a "$OUT/sums_warps.log" | grep -E "^w$run (luminav)|Error"
done
echo "all done at $(( $(date +%s) - t0 )) s"
