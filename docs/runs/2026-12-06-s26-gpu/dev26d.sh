#!/bin/bash
# Session 26, call 4: seeds 3-5 of call 2's fresh regime (TD-CLM v2 factored, tau=0.5, cautious_until=400), fused AdamW beside it.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=290 EVIDENCE_TIMEOUT=310 \
EVIDENCE_ARGS="--parallel 6 --regimes fresh --seeds 3 4 5 --fresh-steps 1500 --held-every 500 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious_until400 --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
