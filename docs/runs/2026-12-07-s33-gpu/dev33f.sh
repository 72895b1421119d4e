#!/bin/bash
# Session 33, call 5: 1. test_gpu_triton_aot.py on main with the new C-program test (a C99 program drives the AOT
# kernels: two CLM steps on device memory against the float64 reference); AOT set build/aot_s33b (main's kernels);
# 2. finalize_dump.py: the JIT finalize's cubin, TTGIR and metadata, and its time alone at 4 and 8 warps.
# Carry build/aot_s33b, .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/lm_site LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s33b
LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) timeout 120 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$OUT/pytest_aot.log" | tail -4
echo "tests done at $(( $(date +%s) - t0 )) s"
timeout 60 python3 docs/runs/2026-12-07-s33-gpu/finalize_dump.py 2>&1 | grep -v -i warn
echo "all done at $(( $(date +%s) - t0 )) s"
