#!/bin/bash
# Session 32, call 6 (any card): the AOT one-tensor fp32 sums _a16 at 2 warps with the partials hinted
# (FACTOR_ALIGNED_ARGS, FACTOR_WARPS_ONE_ALIGNED; AOT set build/aot_s32d) against call 4's set (build/aot_s32b): the AOT GPU tests on
# the new set, then the kernel benchmark at 2^28 (TD-CLM factored fp32 and bf16 + masters; nvcc, JIT, AOT),
# alternating new, old, new, old. On an H200, first dev32d.sh's run (issue 18's figures) on the new set.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
if grep -q H200 "$OUT/gpu.txt"; then
  sed 's#build/aot_s32b#build/aot_s32d#' docs/runs/2026-12-07-s32-gpu/dev32d.sh > /tmp/dev32d_c.sh
  mkdir -p "$OUT/h200" && OUT=$OUT/h200 bash /tmp/dev32d_c.sh 2>&1 | tail -40
else
  bash bench/gpu_suite.sh build 2>&1 | tail -1
fi
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/lm_site
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s32d LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) \
  timeout 100 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py 2>&1 \
  | tee "$OUT/pytest_aot.log" | tail -3
echo "tests done at $(( $(date +%s) - t0 )) s"
for run in new:1 old:1 new:2 old:2; do
  set_dir=build/aot_s32b; [ ${run%%:*} = new ] && set_dir=build/aot_s32d
  LUMINAV_TRITON_AOT_DIR=$PWD/$set_dir timeout 70 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master --kinds luminav_nvcc luminav_triton \
    luminav_triton_aot 2>&1 | sed "s/^/$run /" | tee -a "$OUT/sums_ab.log" | grep -E "copy|Error"
done
echo "all done at $(( $(date +%s) - t0 )) s"
