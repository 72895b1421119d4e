#!/bin/bash
# Session 21, call 3: row T3 again with the soft clip (calls 1-2: tau = 0.5 / 1 left the plateau with
# AdamW where plain TD-CLM crawled). The Llama 98M fresh regime, 1,500 steps, held-out loss, seeds 0-2:
# AdamW and TD-CLM factored with tau = 1 (6 processes: 10 of 7.3-7.7 GB fill the H100).
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
EVIDENCE_DEADLINE=500 EVIDENCE_TIMEOUT=560 \
EVIDENCE_ARGS="--parallel 6 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau1 --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
