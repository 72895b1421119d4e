#!/usr/bin/env bash
# session 17: the bf16 tile's warps (4 against 8) on this card: the Llama 98M loop with bf16 parameters, alternating, and 2^28
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
bash bench/gpu_suite.sh build 2>&1 | tail -1
for r in 1 2; do
  for w in 8 4; do
    LUMINAV_TRITON_FACTOR_WARPS=$w PYTHONPATH=/tmp/lm_site timeout 120 python3 bench/optim_training_loop.py --kinds luminav_tdclm_triton --param-dtype bf16 --rounds 1 --reps 20 2>&1 \
      | grep -E "^luminav_tdclm_triton" | sed "s/^/round $r warps=$w bf16 /" | tee -a "$OUT/loop_warps.log"
  done
done
PYTHONPATH=/tmp/lm_site timeout 100 python3 dev17_sweep.py 2>&1 | grep -v -i warn | tee "$OUT/sweep.log"
echo "done at $(( $(date +%s) - t0 )) s"
