#!/bin/bash
# Session 26, call 2: issue 14's evidence in one run with LuminaV's new cautious_until (the mask for the
# first 400 steps, then off; beyond the spec) on top of the soft clip tau=0.5, the best of call 1's screen,
# beside torch's fused AdamW, Adam-mini 1.1.1 and torchao 0.18's AdamW8bit (carried as wheels):
# seeds 0-2, 1,500 fresh steps, held-out loss, twelve compiled processes at once on one GPU.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=548 EVIDENCE_TIMEOUT=578 \
EVIDENCE_ARGS="--parallel 12 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 adam_mini adamw8bit \
  --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
