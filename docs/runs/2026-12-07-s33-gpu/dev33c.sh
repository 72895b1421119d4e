#!/bin/bash
# Session 33, call 3: Note [finalize loads in flight] (four chunks of partials loaded before their adds) against
# main's finalize (build/old_optim_s33/triton_kernels.py; AOT sets build/aot_s33 old, build/aot_s33b new):
# 1. finalize alone at 65,536 partials, old and new, twice; 2. the TD-CLM tensor form at 2^28 (nvcc, JIT, AOT;
# eager and replayed), old and new alternating, twice; 3. the new tree's Triton GPU tests.
# Carry build/aot_s33, build/aot_s33b, build/old_optim_s33, .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_old && cp -r /tmp/lm_site /tmp/lm_site_old && cp build/old_optim_s33/triton_kernels.py /tmp/lm_site_old/luminamoon/optim/
for run in old new old new; do
  site=/tmp/lm_site; [ $run = old ] && site=/tmp/lm_site_old
  PYTHONPATH=$site timeout 60 python3 docs/runs/2026-12-07-s33-gpu/finalize_bench.py 2>&1 | sed "s/^/$run /" | tee -a "$OUT/finalize.log"
done
echo "finalize done at $(( $(date +%s) - t0 )) s"
for run in old new old new; do
  site=/tmp/lm_site; aot=build/aot_s33b; [ $run = old ] && site=/tmp/lm_site_old && aot=build/aot_s33
  PYTHONPATH=$site LUMINAV_TRITON_AOT_DIR=$PWD/$aot timeout 90 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases tdclm_tensor_f32 --kinds luminav_nvcc luminav_triton luminav_triton_aot 2>&1 \
    | sed "s/^/$run /" | tee -a "$OUT/tensor_step.log" | grep -E "of copy|Error"
done
echo "step A/B done at $(( $(date +%s) - t0 )) s"
PYTHONPATH=/tmp/lm_site LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s33b \
  LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) timeout $(( 570 - $(date +%s) + t0 )) \
  python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py \
  2>&1 | tee "$OUT/pytest.log" | tail -3
echo "all done at $(( $(date +%s) - t0 )) s"
