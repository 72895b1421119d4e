#!/bin/bash
# Session 24, call 1 (asked of an H200, the card issue 14 names): the step time of each optimizer in the
# Llama 98M loop first (GPU and host time of opt.step(), graph replays where they exist; torch's fused
# AdamW, TD-CLM v2 factored with and without tau = 0.5, CLM, Adam-mini 1.1.1, torchao 0.18's AdamW8bit),
# 3 rounds of 10 steps; then issue 14's repeated regime (100 batches x 5 epochs, final training loss) for
# torch's fused AdamW, TD-CLM tau = 0.5, Adam-mini and AdamW8bit, seeds 0-2, twelve processes at once,
# each model torch.compile'd (--compile), as session 23's call 2 ran them on an H100.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
export EVIDENCE_WHEELS=.whl
LOOP_TIMEOUT=200 LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_tau0.5 luminav adam_mini adamw8bit --rounds 3 --reps 10" \
  bash bench/gpu_suite.sh build loop
EVIDENCE_DEADLINE=300 EVIDENCE_TIMEOUT=320 \
EVIDENCE_ARGS="--parallel 12 --regimes repeated --seeds 0 1 2 --held-every 100 \
  --kinds adamw_fused luminav_tdclm_tau0.5 adam_mini adamw8bit -- --compile" \
  bash bench/gpu_suite.sh evidence
