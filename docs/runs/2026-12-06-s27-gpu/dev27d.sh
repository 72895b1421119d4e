#!/bin/bash
# Session 27, call 4 (the same warm H200): issue 14's fresh regime at seeds 3-5 (TD-CLM with tau=0.5 and
# cautious_until=400 beside fused AdamW, six compiled processes), then the Llama 98M loop (issue 13's L1-L3 with CLM,
# TD-CLM with the suggested clip) beside torch fused and torch fused capturable, 2 rounds of 20 steps.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi --query-gpu=name --format=csv > "$OUT/gpu.txt"; cat $OUT/gpu.txt
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=320 EVIDENCE_TIMEOUT=340 EVIDENCE_ARGS="--parallel 6 --regimes fresh --seeds 3 4 5 --fresh-steps 1500 \
  --held-every 250 --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
LOOP_TIMEOUT=110 LOOP_ARGS="--kinds torch_fused torch_fused_capturable luminav luminav_tdclm_tau0.5 --rounds 2 --reps 20" \
  bash bench/gpu_suite.sh loop
