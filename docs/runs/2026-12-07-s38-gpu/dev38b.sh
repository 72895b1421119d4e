#!/bin/bash
# Session 38, for a later call (any card; carry .gpu_bundle): main built as bench/gpu_suite.sh builds it, then the
# kernels of a TD-CLM step at 2^28 one by one (session 36's kernel_profile.py, never run), then the same for the
# Llama 98M loop's step (../2026-12-06-s18-gpu/dev18_prof.py). Everything under $OUT is packed into one archive at the
# end: a call brings back only a few files (session 38's call 1 lost its test log, its Nsight Compute report and its
# loop JSON).
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
OUT=$OUT/build bash bench/gpu_suite.sh build 2>&1 | tail -2
PYTHONPATH=/tmp/lm_site:bench timeout 150 python3 docs/runs/2026-12-07-s36-gpu/kernel_profile.py --kinds luminav_nvcc \
  luminav_triton --json "$OUT/kernels_2e28.json" 2>&1 | grep -v Warn | tee "$OUT/kernels_2e28.log"
PYTHONPATH=/tmp/lm_site:bench timeout 150 python3 docs/runs/2026-12-06-s18-gpu/dev18_prof.py torch_fused luminav_tdclm \
  luminav_tdclm_triton 2>&1 | grep -v Warn | tee "$OUT/kernels_loop.log"
tar -C "$OUT" -czf /tmp/out.tgz . && rm -rf "${OUT:?}"/* && mv /tmp/out.tgz "$OUT/out.tgz"
