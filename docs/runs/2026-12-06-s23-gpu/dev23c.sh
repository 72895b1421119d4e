#!/bin/bash
# Session 23, call 3 (the H100 of calls 1-2): three more seeds (3-5) of call 1's fresh regime for fused
# AdamW and TD-CLM v2 factored with tau = 0.5, plus the spec's default tau = 0, the model torch.compile'd
# as in call 1: nine processes, 1,500 steps, held-out loss.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=440 EVIDENCE_TIMEOUT=470 \
EVIDENCE_ARGS="--parallel 9 --regimes fresh --seeds 3 4 5 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5 luminav_tdclm --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
