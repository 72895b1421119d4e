#!/usr/bin/env bash
# session 19 call 2 (same warm machine): the loop, main (A) against 128 slots (B), alternating, with the Triton JIT
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT; export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ls /tmp/siteA /tmp/siteB > /dev/null 2>&1 || { echo "sites missing"; bash dev18.sh > /dev/null 2>&1; }
t0=$(date +%s)
for s in B A B A; do
  [ $(( $(date +%s) - t0 )) -gt 420 ] && break
  echo "=== loop $s"
  PYTHONPATH=/tmp/site$s:bench timeout 140 python3 bench/optim_training_loop.py --json $OUT/loop_$s$SECONDS.json \
    --kinds torch_fused luminav luminav_tdclm luminav_triton luminav_tdclm_triton --rounds 2 --reps 20 2>&1 | tee -a $OUT/loop_$s.log | grep -v Warn | tail -9
  echo "t=$(( $(date +%s) - t0 )) s"
done
