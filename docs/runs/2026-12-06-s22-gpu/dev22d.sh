#!/bin/bash
# Session 22, call 4: Adam-mini (PyPI adam-mini 1.1.1, carried as a wheel) beside AdamW and TD-CLM
# factored with tau = 0.5 in one run, the fresh regime, 1,500 steps, held-out loss, seeds 0-1 (six
# processes: three seeds of three optimizers would not finish in one call on an H100).
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=500 EVIDENCE_TIMEOUT=540 \
EVIDENCE_ARGS="--parallel 6 --regimes fresh --seeds 0 1 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5 adam_mini --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
