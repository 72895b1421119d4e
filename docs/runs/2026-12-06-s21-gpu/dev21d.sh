#!/bin/bash
# Session 21, call 4: the repeated regime (row T8: 100 batches x 5 epochs, final training loss), seeds 0-2:
# AdamW, TD-CLM factored, and TD-CLM with the soft clip tau = 1, in one call (9 processes).
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
EVIDENCE_DEADLINE=480 EVIDENCE_TIMEOUT=540 \
EVIDENCE_ARGS="--parallel 9 --regimes repeated --seeds 0 1 2 --distinct-batches 100 --epochs 5 --held-every 100 \
  --kinds adamw_fused luminav_tdclm luminav_tdclm_tau1 --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
