#!/bin/bash
# Session 27, call 5 (the same warm H200, call 4's build): the GPU test suites.
nvidia-smi --query-gpu=name --format=csv,noheader
bash bench/gpu_suite.sh tests 2>&1 | tail -15
