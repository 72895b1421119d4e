#!/bin/bash
# Session 28, call 1: issue 18's factored pass 2 in segments (Note [factored apply in segments]) against main's
# kernels, side by side on one H200: the package built once; main's triton_kernels.py (build/old_optim) in a copy
# of the site; the AOT kernels of both built on the CPU machine (build/aot_s28, build/aot_s28_old, sm_90); two
# rounds, the order alternated; then the JIT's first-step compile time.
# ALLOW_H100=1: run on any card (an H100 when no H200 is lent).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ -z "${ALLOW_H100:-}" ] && ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
bash bench/gpu_suite.sh build 2>&1 | tail -5
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_old && cp -r /tmp/lm_site /tmp/lm_site_old && cp build/old_optim/triton_kernels.py /tmp/lm_site_old/luminamoon/optim/
cases="tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 clm_f32"
run() {  # $1 new|old, $2 round
  local site=/tmp/lm_site aot=$PWD/build/aot_s28
  [ "$1" = old ] && site=/tmp/lm_site_old aot=$PWD/build/aot_s28_old
  LUMINAV_TRITON_AOT_DIR=$aot PYTHONPATH=$site timeout 150 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases $cases --kinds luminav_triton luminav_step_triton_aot luminav_nvcc \
    --out "$OUT/bench_$1_$2.json" 2>&1 | sed "s/^/$1 r$2 /" | tee -a "$OUT/bench.log" | grep -v "^$"
}
run new 1; run old 1; run old 2; run new 2
PYTHONPATH=/tmp/lm_site timeout 100 python3 bench/triton_step_bench.py --reps 30 --replay --cases clm_f32 \
  --kinds torch_fused_adamw --out "$OUT/bench_compile.json" 2>&1 | tee -a "$OUT/bench.log" | tail -3
