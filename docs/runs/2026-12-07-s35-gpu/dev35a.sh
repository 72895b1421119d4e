#!/bin/bash
# Session 35, call 1 (issue 18): main (AOT set build/aot_s35m, built here from main's kernels) on whichever card
# comes. 1. test_gpu_triton_aot.py, with the C-program test (a C99 program drives the AOT kernels, never run on a
# GPU before); 2. issue 18's kernel benchmark at 2^28, every case, nvcc / Triton JIT / Triton AOT / torch fused
# AdamW, eager and replayed, with the JIT's first-step compile time (the TD-CLM tensor rows check the JIT finalize
# mend, 517621d). Call 2 (dev35b.sh) runs the Llama 98M loop on the package this call builds.
# Carry .gpu_bundle, build/aot_s35m. LIMIT caps the seconds this call may use (default 575).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
left() { echo $(( ${LIMIT:-575} - $(date +%s) + t0 )); }
bash bench/gpu_suite.sh build 2>&1 | tail -2
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s35m PYTHONPATH=/tmp/lm_site
export LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py -rs \
  2>&1 | tee "$OUT/pytest_aot.log" | tail -4
echo "tests done at $(( $(date +%s) - t0 )) s"
timeout $(left) python3 bench/triton_step_bench.py --reps 30 --replay \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|first step|Error|captured"
echo "all done at $(( $(date +%s) - t0 )) s"
