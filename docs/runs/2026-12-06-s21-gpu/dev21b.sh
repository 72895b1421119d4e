#!/bin/bash
# Session 21, call 2: the soft clip's tau for TD-CLM (call 1: tau = 1 escaped the plateau with AdamW
# on seed 2). The Llama 98M fresh regime, 400 steps, seeds 0-2: AdamW, TD-CLM with tau 0.5, 1 and 2.
set -u
export OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
( while sleep 5; do nvidia-smi --query-gpu=memory.used --format=csv,noheader; done > "$OUT/gpu_memory.txt" 2>&1 ) &
sampler=$!
EVIDENCE_DEADLINE=470 EVIDENCE_TIMEOUT=510 \
EVIDENCE_ARGS="--parallel 12 --regimes fresh --seeds 0 1 2 --fresh-steps 400 --held-every 100 \
  --kinds adamw_fused luminav_tdclm_tau0.5 luminav_tdclm_tau1 luminav_tdclm_tau2 \
  --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
kill $sampler
sort -n "$OUT/gpu_memory.txt" | tail -1
