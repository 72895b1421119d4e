#!/bin/bash
# Session 31, call 2: the AOT and asynchronous-step GPU tests again (the two-captures and capture-refusal tests are
# new, and luminav_step now launches the batches too); on an H200 only, the rest of dev31a.sh (the profile, the
# Llama loop, the factored-segments A/B) and issue 18's kernel benchmark in one run: nvcc, Triton JIT, Triton AOT and
# torch's fused AdamW at 2^28 (CLM fp32, TD-CLM factored fp32 and bf16 + masters; eager and replayed).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if ! grep -q H200 "$OUT/gpu.txt"; then
  t0=$(date +%s)
  bash bench/gpu_suite.sh build 2>&1 | tail -3
  export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s31 PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$(find /tmp/lm_site -name \
    'libluminav.so*' | head -1) timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts= \
    tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_async_step.py -rs 2>&1 | tee "$OUT/pytest_aot.log" | tail -15
  echo "tests done at $(( $(date +%s) - t0 )) s"
  exit 0
fi
bash docs/runs/2026-12-07-s31-gpu/dev31a.sh
LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s31 \
  PYTHONPATH=/tmp/lm_site timeout 150 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
  --cases clm_f32 tdclm_factored_f32 tdclm_factored_bf16_master \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|Error|captured"
