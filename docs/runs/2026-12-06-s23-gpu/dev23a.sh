#!/bin/bash
# Session 23, call 1: issue 14's evidence in one run, the fresh regime: torch's fused AdamW, TD-CLM v2
# factored with tau = 0.5, Adam-mini 1.1.1 and torchao 0.18's AdamW8bit (both carried as wheels), seeds
# 0-2, 1,500 steps, held-out loss: twelve runs at once on one GPU (asked of an H200 three times; none
# came, so on an H100: the twelve must fit its 80 GB, ~6.5 GB each, which the compiled model may).
# The model's forward and backward are torch.compile'd in every run (--compile) so that the twelve
# finish in one call; the optimizers' steps are not compiled (AdamW8bit compiles its own, as always).
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # twelve processes' caches share the card
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence  # a warm machine keeps the last call's runs
(sleep 200; nvidia-smi > "$OUT/nvidia_smi_200s.txt" 2>&1) &
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=548 EVIDENCE_TIMEOUT=578 \
EVIDENCE_ARGS="--parallel ${PARALLEL:-12} --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds adamw_fused luminav_tdclm_tau0.5 adam_mini adamw8bit --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
