#!/usr/bin/env bash
# session 17: the sums' warps by tile (build, AOT kernels for sm_90 built here, GPU Triton suites, sweep, 2^28 bench, loop)
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
bash bench/gpu_suite.sh build 2>&1 | tail -3 &
timeout 200 python3 src/optim/triton/build_triton_aot.py --out $PWD/aot17 --targets sm_90 --kernels all > "$OUT/aot_build.log" 2>&1; echo "aot rc=$? at $(( $(date +%s) - t0 )) s"
wait
export LUMINAV_TRITON_AOT_DIR=$PWD/aot17
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$OUT/pytest.log" | tail -4
echo "tests at $(( $(date +%s) - t0 )) s"
PYTHONPATH=/tmp/lm_site timeout 100 python3 dev17_sweep.py 2>&1 | grep -v -i warn | tee "$OUT/sweep.log"
for p in 1 2; do
  PYTHONPATH=/tmp/lm_site timeout 100 python3 bench/triton_step_bench.py --reps 30 --skip-compile --replay \
    --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_step_triton_aot 2>&1 | sed "s/^/run$p /" \
    | tee -a "$OUT/triton_vs_nvcc.log" | grep -E "copy|ms" | tail -20
done
echo "bench at $(( $(date +%s) - t0 )) s"
left=$(( 570 - ($(date +%s) - t0) ))
[ $left -gt 60 ] && LOOP_TIMEOUT=$left LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_triton --rounds 2 --reps 20" bash bench/gpu_suite.sh loop 2>&1 | tail -12
echo "done at $(( $(date +%s) - t0 )) s"
