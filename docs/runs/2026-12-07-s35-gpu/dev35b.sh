#!/bin/bash
# Session 35, call 2 (issues 13, 14, 18): the Llama 98M training loop on the package call 1 built (rebuilt if the
# machine is fresh): torch fused AdamW, LuminaV CLM, TD-CLM on nvcc, the Triton JIT and the Triton AOT kernels,
# eager and graph-replayed. Carry .gpu_bundle, build/aot_s35m. LIMIT caps the seconds (default 575).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build 2>&1 | tail -2
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s35m PYTHONPATH=/tmp/lm_site
timeout $(( ${LIMIT:-575} - $(date +%s) + t0 )) python3 bench/optim_training_loop.py --kinds torch_fused luminav \
  luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 2 --reps 20 --json "$OUT/loop.json" 2>&1 \
  | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
echo "all done at $(( $(date +%s) - t0 )) s"
