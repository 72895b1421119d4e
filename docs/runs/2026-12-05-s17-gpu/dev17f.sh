#!/usr/bin/env bash
# session 17: the sums' warps in the user's loop (Llama 98M, Triton TD-CLM), 8 for every tile against the per-tile default, alternating; then the 2^28 sweep
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
bash bench/gpu_suite.sh build 2>&1 | tail -1
for r in 1 2 3; do
  for w in 8 default; do
    if [ $w = default ]; then unset LUMINAV_TRITON_FACTOR_WARPS; else export LUMINAV_TRITON_FACTOR_WARPS=$w; fi
    for pd in fp32 bf16; do
      PYTHONPATH=/tmp/lm_site timeout 120 python3 bench/optim_training_loop.py --kinds luminav_tdclm_triton --param-dtype $pd --rounds 1 --reps 20 2>&1 \
        | grep -E "^luminav_tdclm_triton" | sed "s/^/round $r warps=$w $pd /" | tee -a "$OUT/loop_warps.log"
    done
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
unset LUMINAV_TRITON_FACTOR_WARPS
PYTHONPATH=/tmp/lm_site timeout 100 python3 dev17_sweep.py 2>&1 | grep -v -i warn | tee "$OUT/sweep.log"
echo "done at $(( $(date +%s) - t0 )) s"
