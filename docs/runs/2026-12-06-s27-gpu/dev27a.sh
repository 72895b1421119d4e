#!/bin/bash
# Session 27, call 1: issue 14's evidence on an H200 if one is lent (dev26b.sh's run: TD-CLM with tau=0.5 and
# cautious_until=400 beside fused AdamW, Adam-mini 1.1.1 and torchao 0.18's AdamW8bit, seeds 0-2, 1,500 fresh
# steps, held-out loss, twelve compiled processes on one GPU); on any other card it stops at once (the H100
# runs of session 26 are rows T3o-T3q).
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
rm -rf /tmp/lm_evidence
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=540 EVIDENCE_TIMEOUT=570 \
EVIDENCE_ARGS="--parallel 12 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 adam_mini adamw8bit \
  --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
