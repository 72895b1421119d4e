#!/bin/bash
# Session 25, call 3 (the same warm H100, the session's last device seconds): the step of each optimizer of
# call 1 in the Llama 98M loop (GPU and host time of opt.step(), graph replays where they exist), 2 rounds of 10.
set -u
export OUT=${OUT:-$PWD/gpu_out}
LOOP_TIMEOUT=150 LOOP_ARGS="--kinds torch_fused luminav_tdclm_cautious adam_mini adamw8bit --rounds 2 --reps 10" \
  bash bench/gpu_suite.sh loop
