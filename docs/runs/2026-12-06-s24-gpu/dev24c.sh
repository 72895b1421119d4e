#!/bin/bash
# Session 24, call 3: the cautious mask at the full 1,500 fresh steps beside torch's fused AdamW, four
# seeds each: TD-CLM v2 factored with the cautious mask, with and without tau = 0.5 (call 2's screen, dev24b.sh: with
# tau = 0.5 it left the plateau at steps 110-130 in 7 of 7 seeds), twelve compiled processes at once.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=548 EVIDENCE_TIMEOUT=578 \
EVIDENCE_ARGS="--parallel 12 --regimes fresh --seeds 0 1 2 3 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5_cautious luminav_tdclm_cautious --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
