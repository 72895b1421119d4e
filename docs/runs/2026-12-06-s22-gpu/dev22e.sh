#!/bin/bash
# Session 22, call 5: the step time of TD-CLM with the soft clip the README now suggests (tau = 0.5: a
# tanh per element in the apply kernel) beside TD-CLM without it and torch's fused AdamW, in the Llama
# 98M loop (GPU and host time of opt.step(), graph replays), 3 rounds of 20 steps.
set -u
export OUT=${OUT:-$PWD/gpu_out}
LOOP_TIMEOUT=250 LOOP_ARGS="--kinds torch_fused luminav_tdclm luminav_tdclm_tau0.5 --rounds 3 --reps 20" \
  bash bench/gpu_suite.sh build loop
