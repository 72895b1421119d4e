#!/bin/bash
# Session 32, call 3 (any card): the multi-tensor fp32 factor sums at 4 warps (FACTOR_WARPS[128]; AOT set
# build/aot_s32b) against 8 (LUMINAV_TRITON_FACTOR_WARPS=8 and build/aot_s32, call 1's), in the Llama 98M loop
# (nvcc, JIT, AOT) and at 2^28 (AOT's one-tensor _a16 sums), alternating; then the AOT GPU tests on the new set.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/lm_site
for run in new:1 old:1 new:2 old:2; do
  if [ ${run%%:*} = old ]; then set -- LUMINAV_TRITON_FACTOR_WARPS=8 LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32
  else set -- LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32b; fi
  env "$@" timeout 60 python3 bench/optim_training_loop.py --kinds luminav_tdclm luminav_tdclm_triton \
    luminav_tdclm_triton_aot --rounds 1 --reps 20 2>&1 | sed "s/^/$run /" | tee -a "$OUT/loop.log" \
    | grep -E "^$run (luminav)|Error"
  env "$@" timeout 60 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
    --cases tdclm_factored_f32 --kinds luminav_nvcc luminav_triton_aot 2>&1 | sed "s/^/$run /" \
    | tee -a "$OUT/bench.log" | grep -E "copy|Error"
  echo "$run done at $(( $(date +%s) - t0 )) s"
done
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32b LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) \
  timeout 100 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py 2>&1 \
  | tee "$OUT/pytest_aot.log" | tail -3
echo "all done at $(( $(date +%s) - t0 )) s"
