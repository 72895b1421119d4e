#!/bin/bash
# Session 27, call 6 (the same warm H200, call 4's build, so the build's status file is written by hand): issue 14's
# repeated regime (100 batches x 5 epochs) with every peer: fused AdamW, Adam-mini 1.1.1, torchao 0.18's AdamW8bit
# and TD-CLM with tau=0.5 and cautious_until=400, seeds 0-2, twelve compiled processes.
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt"; cat $OUT/gpu.txt
rm -rf /tmp/lm_evidence; echo 0 > /tmp/lm_site.rc
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=190 EVIDENCE_TIMEOUT=215 EVIDENCE_ARGS="--parallel 12 --regimes repeated --seeds 0 1 2 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 adam_mini adamw8bit --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh evidence 2>&1 | tail -14
