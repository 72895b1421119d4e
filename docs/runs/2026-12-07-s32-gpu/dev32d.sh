#!/bin/bash
# Session 32, call 4, on an H200 only (an H100 exits at once; with ANY_CARD=1 it runs 1 and 2): issue 18's figures for main after calls 1-3 (the
# factor kernels at 8 warps, the multi-tensor fp32 sums at 4, the JIT's one-tensor fp32 sums at 2; AOT set
# build/aot_s32d). 1. the kernel benchmark at 2^28: nvcc, JIT, AOT, torch fused AdamW (CLM fp32, TD-CLM factored
# fp32 and bf16 + masters; eager and replayed); 2. the Llama 98M loop (torch fused, nvcc, JIT, AOT TD-CLM);
# 3. the factored pass 2 in segments against main's kernels file, the JIT at 2^28. Carried as
# build/new_optim_s32/triton_kernels.py: `git show triton-factored-segments:python/luminamoon/optim/triton_kernels.py`
# (the branch is main's file plus the segments).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
[ "${ANY_CARD:-0}" = 1 ] || grep -q H200 "$OUT/gpu.txt" || exit 0
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32d PYTHONPATH=/tmp/lm_site
timeout 150 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
  --cases clm_f32 tdclm_factored_f32 tdclm_factored_bf16_master \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|Error|captured"
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
timeout 150 python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm luminav_tdclm_triton \
  luminav_tdclm_triton_aot --rounds 2 --reps 20 --json "$OUT/loop.json" 2>&1 | tee "$OUT/loop.log" \
  | grep -E "^(torch_fused|luminav)|Error|floor"
echo "loop done at $(( $(date +%s) - t0 )) s"
grep -q H200 "$OUT/gpu.txt" || exit 0
rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new \
  && cp build/new_optim_s32/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
for run in new:1 old:1; do
  site=/tmp/lm_site; [ ${run%%:*} = new ] && site=/tmp/lm_site_new
  PYTHONPATH=$site timeout 60 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master --kinds luminav_triton 2>&1 \
    | sed "s/^/$run /" | tee -a "$OUT/seg.log" | grep -E "copy|Error|captured"
done
echo "all done at $(( $(date +%s) - t0 )) s"
