#!/bin/bash
# Session 22, call 2: issue 14's moonshot with the soft clip at tau = 0.5 (call 1: 1,500 fresh steps,
# -2.07% against AdamW, no seed crawled). The repeated regime (100 batches x 5 epochs, final training
# loss), seeds 0-2: AdamW and TD-CLM factored with tau = 0.5 (6 processes).
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
EVIDENCE_DEADLINE=480 EVIDENCE_TIMEOUT=540 \
EVIDENCE_ARGS="--parallel 6 --regimes repeated --seeds 0 1 2 --distinct-batches 100 --epochs 5 --held-every 100 \
  --kinds adamw_fused luminav_tdclm_tau0.5 --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
