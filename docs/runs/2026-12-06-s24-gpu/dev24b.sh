#!/bin/bash
# Session 24, call 2: a screen for TD-CLM's late plateau escape (issue 14): the spec's two other per-element
# options on top of tau = 0.5, the cautious mask and lam = 0.1 (Nesterov's weight for beta1 = 0.9),
# seven seeds each, 400 fresh steps (the escape, training loss below 3.0, came at a median step 170 for
# AdamW over 34 earlier runs and 210 for tau = 0.5 over 23), fourteen compiled processes at once.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_DEADLINE=${DEADLINE:-380} EVIDENCE_TIMEOUT=${TIMEOUT:-400} \
EVIDENCE_ARGS="--parallel 14 --regimes fresh --seeds 0 1 2 3 4 5 6 --fresh-steps 400 --held-every 200 \
  --kinds luminav_tdclm_tau0.5_cautious luminav_tdclm_tau0.5_lam0.1 --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
