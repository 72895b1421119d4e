#!/bin/bash
# Session 36 (issue 18): the factored bf16 + masters step at 2^28 runs at 73% (AOT) / 81% (JIT) of the H200's
# copy (call 1) against 89-91% on the H100. (1) kernel by kernel, nvcc / JIT / AOT, bf16 and fp32 factored
# (kernel_profile.py); (2) the JIT's launch geometry swept by its tuning variables on the bf16 case, one
# process each; (3) with time left, session 35's host trace of the Llama step. Carry .gpu_bundle and build/aot_s35m.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s35m
OUT=/tmp/build_new bash bench/gpu_suite.sh build 2>&1 | tail -1
PYTHONPATH=/tmp/lm_site:bench timeout 150 python3 docs/runs/2026-12-07-s36-gpu/kernel_profile.py --steps 10 \
  --json "$OUT/profile.json" 2>&1 | tee "$OUT/profile.log"
echo "profile done at $(( $(date +%s) - t0 )) s"
sweep() {  # label, then VAR=value pairs for the JIT
  local label=$1; shift
  env "$@" PYTHONPATH=/tmp/lm_site timeout 60 python3 bench/triton_step_bench.py --skip-compile --replay --reps 20 \
    --cases tdclm_factored_bf16_master ${SWEEP_F32:+tdclm_factored_f32} --kinds luminav_triton 2>&1 \
    | grep -E "luminav_triton|Error" | sed "s/^/$label /" | tee -a "$OUT/sweep.log"
}
for round in 1 2; do
  sweep default X=0
  sweep apply2048 LUMINAV_TRITON_APPLY_BLOCK=2048
  sweep apply2048w8 LUMINAV_TRITON_APPLY_BLOCK=2048 LUMINAV_TRITON_NUM_WARPS=8
  sweep w8 LUMINAV_TRITON_NUM_WARPS=8
  sweep apply512w2 LUMINAV_TRITON_APPLY_BLOCK=512 LUMINAV_TRITON_NUM_WARPS=2
  sweep fw8 LUMINAV_TRITON_FACTOR_WARPS=8
  sweep fw2 LUMINAV_TRITON_FACTOR_WARPS=2
  [ $(( $(date +%s) - t0 )) -gt 380 ] && break
done
# (3) with time left: the Llama 98M step's host time, AOT / JIT / nvcc, with the pointer cache (session 35's trace)
[ $(( $(date +%s) - t0 )) -lt 400 ] && PYTHONPATH=/tmp/lm_site timeout 120 python3 \
  docs/runs/2026-12-07-s35-gpu/aot_eager_trace.py 2>&1 | grep -v -i warn | tee "$OUT/aot_eager_trace.log" | head -40
echo "all done at $(( $(date +%s) - t0 )) s"
