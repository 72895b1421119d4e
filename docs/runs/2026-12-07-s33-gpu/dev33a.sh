#!/bin/bash
# Session 33, call 1: main at 90c0e8d on any card. 1. every GPU test of the optimizer (session 32's two review
# mends, 0f12976 and ce55948, had run on CPU only); AOT set build/aot_s33 (main's kernels file, sm_90).
# 2. on an H200 only, first (then only the AOT and asynchronous-step tests): issue 18's kernel benchmark at 2^28 and the Llama 98M loop (as dev32d.sh), and the factored
# pass 2 in segments (build/new_optim_s32/triton_kernels.py) against main's, the JIT at 2^28.
# Carry build/aot_s33, build/new_optim_s32, .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s33 PYTHONPATH=/tmp/lm_site
tests="tests/optim/test_gpu_*.py"; limit=330
if grep -q H200 "$OUT/gpu.txt"; then
  sed -i 's#build/aot_s32d#build/aot_s33#' docs/runs/2026-12-07-s32-gpu/dev32d.sh
  ANY_CARD=1 bash docs/runs/2026-12-07-s32-gpu/dev32d.sh 2>&1 | grep -v "^name\|NVIDIA"
  tests="tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_async_step.py"; limit=$(( 560 - $(date +%s) + t0 ))
fi
LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) timeout $limit python3 -m pytest -q \
  -p no:cacheprovider -o addopts= $tests -rs 2>&1 | tee "$OUT/pytest_gpu.log" | tail -12
echo "all done at $(( $(date +%s) - t0 )) s"
