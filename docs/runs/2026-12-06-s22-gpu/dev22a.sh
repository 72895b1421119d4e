#!/bin/bash
# Session 22, call 1: row T3 with the soft clip at tau = 0.5 (session 21: none of three seeds crawled at
# 400 steps; tau = 1 at 1,500 steps gave +2.07%). The Llama 98M fresh regime, 1,500 steps, held-out
# loss, seeds 0-2: AdamW and TD-CLM factored with tau = 0.5 (6 processes).
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
EVIDENCE_DEADLINE=510 EVIDENCE_TIMEOUT=560 \
EVIDENCE_ARGS="--parallel 6 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5 --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
