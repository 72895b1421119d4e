#!/bin/bash
# Session 32, call 1, on branch triton-aot-sync-batches rebased onto main (luminav_step launches the batches too),
# with two Triton changes: the factor kernels (rows, cols) at 8 warps, not 4 (FACTOR_FORM_WARPS; AOT set
# build/aot_s32), and the JIT's one-tensor fp32 factor sums at 2 warps (FACTOR_WARPS_ONE_ALIGNED).
# 1. the AOT and asynchronous-step GPU tests (main's two-captures and capture-refusal tests are new);
# 2. the Llama 98M loop (TD-CLM), new against old in one call: the old settings are LUMINAV_TRITON_FACTOR_FORM_WARPS=4
#    for the JIT and the AOT set build/aot_s31 (the same kernels at 4 warps); nvcc beside both as the drift anchor;
# 3. the one-tensor sums at 2^28: LUMINAV_TRITON_FACTOR_WARPS=8 (old) against the default;
# on an H200 only, then: 4. issue 18's kernel benchmark at 2^28 (nvcc, JIT, AOT, torch fused AdamW; eager and
# replayed); 5. the factored pass 2 in segments (branch triton-factored-segments applied to this tree's kernels file:
# build/new_optim_s32/triton_kernels.py) against this tree's, the JIT at 2^28.
# Carry build/aot_s31, build/aot_s32, build/new_optim_s32, .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32 PYTHONPATH=/tmp/lm_site
LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) timeout 200 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_async_step.py -rs 2>&1 \
  | tee "$OUT/pytest_aot.log" | tail -15
echo "tests done at $(( $(date +%s) - t0 )) s"
kinds="luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot"
grep -q H200 "$OUT/gpu.txt" && kinds="torch_fused $kinds"
for run in new:1 old:1 new:2 old:2; do
  which=${run%%:*}
  if [ $which = old ]; then
    env LUMINAV_TRITON_FACTOR_FORM_WARPS=4 LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s31 timeout 100 python3 \
      bench/optim_training_loop.py --kinds $kinds --rounds 1 --reps 20 --json "$OUT/loop_${run/:/_}.json" 2>&1 \
      | sed "s/^/$run /" | tee -a "$OUT/loop.log" | grep -E "^$run (torch_fused|luminav)|Error|floor"
  else
    timeout 100 python3 bench/optim_training_loop.py --kinds $kinds --rounds 1 --reps 20 \
      --json "$OUT/loop_${run/:/_}.json" 2>&1 | sed "s/^/$run /" | tee -a "$OUT/loop.log" \
      | grep -E "^$run (torch_fused|luminav)|Error|floor"
  fi
  echo "loop $run done at $(( $(date +%s) - t0 )) s"
done
for w in 8 default; do
  [ $w = default ] && unset LUMINAV_TRITON_FACTOR_WARPS || export LUMINAV_TRITON_FACTOR_WARPS=$w
  timeout 60 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile --cases tdclm_factored_f32 \
    --kinds luminav_triton --out "$OUT/warps_$w.json" 2>&1 | sed "s/^/warps $w: /" | tee -a "$OUT/warps_ab.log" \
    | grep -E "copy|Error"
done
unset LUMINAV_TRITON_FACTOR_WARPS
echo "warps A/B done at $(( $(date +%s) - t0 )) s"
grep -q H200 "$OUT/gpu.txt" || exit 0
timeout 150 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
  --cases clm_f32 tdclm_factored_f32 tdclm_factored_bf16_master \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|Error|captured"
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new \
  && cp build/new_optim_s32/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
for run in new:1 old:1; do
  which=${run%%:*}; site=/tmp/lm_site; [ $which = new ] && site=/tmp/lm_site_new
  PYTHONPATH=$site timeout 60 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
    --cases tdclm_factored_f32 tdclm_factored_bf16_master --kinds luminav_triton --out "$OUT/seg_${run/:/_}.json" \
    2>&1 | sed "s/^/$run /" | tee -a "$OUT/seg.log" | grep -E "copy|Error|captured"
done
echo "all done at $(( $(date +%s) - t0 )) s"
