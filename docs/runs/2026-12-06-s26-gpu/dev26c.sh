#!/bin/bash
# Session 26, call 3: the repeated regime (100 batches x 5 epochs, final training loss) for call 2's setting
# (TD-CLM v2 factored, tau=0.5, cautious=True, cautious_until=400) beside fused AdamW, seeds 0-2, compiled.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=330 EVIDENCE_TIMEOUT=350 \
EVIDENCE_ARGS="--parallel 6 --regimes repeated --seeds 0 1 2 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
