#!/bin/bash
# Session 23, call 2 (the same H200, warm): issue 14's evidence, the repeated regime (100 batches x 5
# epochs, final training loss) for the same four optimizers and three seeds as call 1, twelve processes,
# the model torch.compile'd as in call 1; then the step time of each in the Llama 98M loop (GPU and host
# time of opt.step(), graph replays where they exist), 2 rounds of 10 steps.
set -u
export OUT=${OUT:-$PWD/gpu_out}
rm -rf /tmp/lm_evidence
EVIDENCE_WHEELS=.whl EVIDENCE_DEADLINE=330 EVIDENCE_TIMEOUT=350 \
EVIDENCE_ARGS="--parallel 12 --regimes repeated --seeds 0 1 2 --held-every 100 \
  --kinds adamw_fused luminav_tdclm_tau0.5 adam_mini adamw8bit --luminav-after /tmp/lm_site.rc -- --compile" \
  bash bench/gpu_suite.sh build_async evidence
LOOP_TIMEOUT=200 LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_tau0.5 adam_mini adamw8bit --rounds 2 --reps 10" \
  bash bench/gpu_suite.sh loop
