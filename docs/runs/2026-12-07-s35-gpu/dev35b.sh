#!/bin/bash
# Session 35, call 2 (issue 18), right after call 1 on the same warm machine (rebuilds if it is fresh):
# test_gpu_triton_aot.py, with the C-program test (a C99 program drives the AOT kernels; never run on a GPU before).
# Carry .gpu_bundle, build/aot_s35m.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build 2>&1 | tail -2
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s35m PYTHONPATH=/tmp/lm_site
export LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py -rs \
  2>&1 | tee "$OUT/pytest_aot.log" | tail -6
echo "all done at $(( $(date +%s) - t0 )) s"
