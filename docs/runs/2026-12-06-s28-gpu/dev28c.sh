#!/bin/bash
# Session 28, call 3 (dev28a.sh's run found a compile failure of the CLM JIT kernel with C specialized to 1, fixed in
# the commit after 9e9f653; its H100 figures are in docs/runs/2026-12-06-s28-gpu/call1-h100/): on an H200 only
# (ALLOW_H100=1 for any card), in one call: the build; issue 18's kernels at 2^28 with these kernels and with main's
# (build/old_optim, build/aot_s28_old), two rounds, the order alternated; the Triton GPU tests (JIT and triton-aot
# with the CPU-built sm_90 kernels of build/aot_s28); the Llama 98M loop's TD-CLM Triton step, new then old.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ -z "${ALLOW_H100:-}" ] && ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_old && cp -r /tmp/lm_site /tmp/lm_site_old && cp build/old_optim/triton_kernels.py /tmp/lm_site_old/luminamoon/optim/
run() {  # $1 new|old, $2 round
  local site=/tmp/lm_site aot=$PWD/build/aot_s28
  [ "$1" = old ] && site=/tmp/lm_site_old aot=$PWD/build/aot_s28_old
  LUMINAV_TRITON_AOT_DIR=$aot PYTHONPATH=$site timeout 120 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master clm_f32 \
    --kinds luminav_triton luminav_step_triton_aot ${3:-} --out "$OUT/bench_$1_$2.json" 2>&1 | sed "s/^/$1 r$2 /" \
    | tee -a "$OUT/bench.log" | grep -E "copy|replay|aot|nvcc|torch|Error"
}
run new 1 "luminav_nvcc torch_fused_adamw"; run old 1; run old 2; run new 2
echo "bench done at $(( $(date +%s) - t0 )) s"
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s28 PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 \
  | tee "$OUT/pytest.log" | tail -8
echo "tests done at $(( $(date +%s) - t0 )) s"
[ $(( $(date +%s) - t0 )) -lt 260 ] || { echo "no time left for the loop"; exit 0; }
for v in new old; do
  site=/tmp/lm_site; [ $v = old ] && site=/tmp/lm_site_old
  PYTHONPATH=$site timeout 90 python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm_triton \
    --rounds 1 --reps 20 --json "$OUT/loop_$v.json" 2>&1 | sed "s/^/$v /" | tee -a "$OUT/loop.log" | tail -6
done
echo "all done at $(( $(date +%s) - t0 )) s"
