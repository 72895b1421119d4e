#!/bin/bash
# Session 33, call 4: main at the finalize change (2b370a1; AOT set build/aot_s33b): 1. the TD-CLM tensor form's
# step at 2^28 per kernel (torch.profiler: nvcc, JIT, AOT); 2. issue 18's whole benchmark in one run, as
# dev33b.sh (every case at 2^28 with the first-step compile time, then the Llama 98M loop).
# Carry build/aot_s33b, .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
t0=$(date +%s)
AOT=build/aot_s33b bash docs/runs/2026-12-07-s33-gpu/dev33b.sh
LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu PYTHONPATH=/tmp/lm_site \
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s33b timeout $(( 580 - $(date +%s) + t0 )) \
  python3 docs/runs/2026-12-07-s33-gpu/tensor_profile.py 2>&1 | tee "$OUT/tensor_profile.log" | grep -v Warning
echo "all done at $(( $(date +%s) - t0 )) s"
