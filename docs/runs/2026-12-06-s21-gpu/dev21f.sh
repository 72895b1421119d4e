#!/bin/bash
# Session 21, call 6: the crawl probe (call 5) showed TD-CLM's plateau steps at twice AdamW's RMS in the
# MLP and attention values of the crawling seed, from a few elements whose factored second moment is far
# below their own. The variant here floors each element's second moment at c * m^2 (the bound AdamW's
# moments always satisfy; no memory), in plain torch (bench/tdclm_torch_reference.py): the fresh regime,
# 1,500 steps, held-out loss, seeds 0-2, beside AdamW. No build: neither run imports the package.
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
EVIDENCE_DEADLINE=440 EVIDENCE_TIMEOUT=470 \
EVIDENCE_ARGS="--parallel 6 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused reference_tdclm_floor" \
  bash bench/gpu_suite.sh evidence
