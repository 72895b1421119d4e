#!/bin/bash
# Session 27, call 2 (only after call 1 came on an H200, on the same warm machine): issue 14's repeated regime
# (100 batches x 5 epochs, seeds 0-2, TD-CLM with tau=0.5 and cautious_until=400 beside fused AdamW), then the
# Llama 98M loop's step times, then issue 18's Triton and nvcc kernels at 2^28 (JIT, eager and replay).
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=200 EVIDENCE_TIMEOUT=230 \
EVIDENCE_ARGS="--parallel 6 --regimes repeated --seeds 0 1 2 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
LOOP_TIMEOUT=150 LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_tau0.5 luminav_tdclm_cautious --rounds 3 --reps 20" \
  bash bench/gpu_suite.sh loop
PYTHONPATH=/tmp/lm_site timeout 150 python3 bench/triton_step_bench.py --reps 30 --replay \
  --cases tdclm_factored_f32 tdclm_factored_bf16_master clm_f32 --kinds luminav_nvcc luminav_triton torch_fused_adamw \
  --out "$OUT/triton_step.json" 2>&1 | tee "$OUT/triton_step.log" | tail -30
