#!/bin/bash
# Session 24, call 4: the repeated regime (100 batches x 5 epochs, final training loss) with the cautious
# mask, beside torch's fused AdamW, four seeds each, twelve compiled processes (as call 3's fresh runs).
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=300 EVIDENCE_TIMEOUT=320 \
EVIDENCE_ARGS="--parallel 12 --regimes repeated --seeds 0 1 2 3 --held-every 100 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious luminav_tdclm_cautious --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
