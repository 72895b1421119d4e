#!/bin/bash
# Session 24, call 5: the step time of TD-CLM v2 with the cautious mask in the Llama 98M loop, beside
# torch's fused AdamW and TD-CLM without it (GPU and host time of opt.step(), graph replays), 3 rounds.
set -u
export OUT=${OUT:-$PWD/gpu_out}
LOOP_TIMEOUT=200 LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_cautious --rounds 3 --reps 10" \
  bash bench/gpu_suite.sh build loop
