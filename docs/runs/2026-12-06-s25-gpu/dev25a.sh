#!/bin/bash
# Session 25, call 1: issue 14's evidence in one run, the fresh regime, with the setting the README now
# recommends (TD-CLM v2 factored, cautious=True) beside torch's fused AdamW, Adam-mini 1.1.1 and torchao
# 0.18's AdamW8bit (both carried as wheels): seeds 0-2, 1,500 steps, held-out loss, twelve compiled
# processes at once on one GPU (asked of an H200; the reply's device says which card ran it).
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
(sleep 200; nvidia-smi > "$OUT/nvidia_smi_200s.txt" 2>&1) &
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=548 EVIDENCE_TIMEOUT=578 \
EVIDENCE_ARGS="--parallel 12 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_cautious adam_mini adamw8bit --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
