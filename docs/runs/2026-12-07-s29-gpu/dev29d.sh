#!/bin/bash
# Session 29, call 2 as it fit the device time left (any card): the triton-aot backend's asynchronous step
# (Note [triton-aot async step]): the package built, its GPU tests, the kernel benchmark at 2^28 with
# LuminaV(backend="triton-aot") beside the JIT and the synchronous luminav_step, then the user's loop (Llama 98M,
# TD-CLM) with the AOT kernels beside the nvcc kernels and torch fused. Main's kernels only (build/aot_s29_old).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_old PYTHONPATH=/tmp/lm_site
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_LIBRARY=$lib timeout 140 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py \
  -rs 2>&1 | tee "$OUT/pytest_aot.log" | tail -12
echo "aot tests done at $(( $(date +%s) - t0 )) s"
timeout 80 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
  --cases tdclm_factored_f32 tdclm_factored_bf16_master --kinds luminav_triton luminav_triton_aot luminav_step_triton_aot \
  --out "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -E "copy|Error|captured"
echo "bench done at $(( $(date +%s) - t0 )) s"
timeout 130 python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm luminav_tdclm_triton_aot --rounds 2 \
  --reps 10 --json "$OUT/loop.json" 2>&1 | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor|ratio"
echo "all done at $(( $(date +%s) - t0 )) s"
