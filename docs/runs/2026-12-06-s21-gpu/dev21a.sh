#!/bin/bash
# Session 21, call 1: where TD-CLM's slow plateau escape (row T3, seeds 1 and 2) comes from.
# The Llama 98M fresh regime, 400 steps, seeds 1 and 2 (T3's slow ones), AdamW and TD-CLM beside
# three variants: the spec's soft clip tau = 1; the embedding and output layer per row; the same in CLM.
set -u
export OUT=${OUT:-$PWD/gpu_out}
EVIDENCE_DEADLINE=470 EVIDENCE_TIMEOUT=510 \
EVIDENCE_ARGS="--parallel 10 --regimes fresh --seeds 1 2 --fresh-steps 400 --held-every 100 \
  --kinds adamw_fused luminav_tdclm luminav_tdclm_tau1 luminav_tdclm_edges_row luminav_tdclm_edges_clm \
  --luminav-after /tmp/lm_site.rc" \
  bash bench/gpu_suite.sh build_async evidence
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$OUT/nvsmi_end.txt" 2>&1
