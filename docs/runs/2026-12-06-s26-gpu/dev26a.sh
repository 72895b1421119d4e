#!/bin/bash
# Session 26, call 1: a screen of the cautious mask switched off after the loss plateau (beyond the spec).
# Rows T3k/T3m: with the mask every seed leaves the plateau at step ~120, but ends ~3% above an AdamW that
# left it early; its N/K scale grows the step as the signs of u and g agree less. Here the mask ends at
# step 400 (tau 0 and tau 0.5) or 200 (tau 0.5), beside fused AdamW, seeds 0-2, 1,500 fresh steps,
# held-out loss, twelve compiled processes at once on one GPU.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
EVIDENCE_DEADLINE=548 EVIDENCE_TIMEOUT=578 \
EVIDENCE_ARGS="--parallel 12 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_cautious_until400 luminav_tdclm_tau0.5_cautious_until400 \
  luminav_tdclm_tau0.5_cautious_until200 --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
