#!/usr/bin/env bash
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build 2>&1 | tail -3
PYTHONPATH=/tmp/lm_site timeout 120 python3 dev17_prof.py tdclm_factored_bf16_master tdclm_factored_f32 2>&1 | grep -v Warning | tee "$OUT/prof.log"
echo "profiled at $(( $(date +%s) - t0 )) s"
TUNE_CASES="tdclm_factored_bf16_master tdclm_factored_f32" TUNE_CONFIGS="1024:4 2048:4 2048:8 4096:8 1024:8 512:4 1024:4" bash bench/gpu_suite.sh triton_tune 2>&1 | grep -E "replay" 
echo "done at $(( $(date +%s) - t0 )) s"
