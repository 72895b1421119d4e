#!/bin/bash
# Session 23, call 4: does torch.compile of the model change how often TD-CLM (tau = 0.5) crawls off the
# loss plateau? In calls 1-3 (compiled) 5 of its 9 runs left it after step 300, against 2 of 14 eager runs
# in session 22. Here six seeds (0-5) compiled and the same six eager, 400 fresh steps (the escape is
# decided by step ~320), the two sets at once on one GPU, each by bench/optim_llama_evidence.py.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OUT=${OUT:-$PWD/gpu_out}
bash bench/gpu_suite.sh build
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
for mode in compiled eager; do
  rm -rf /tmp/ev_$mode; mkdir -p "$OUT/$mode"
  extra=$([ $mode = compiled ] && echo "-- --compile")
  PYTHONPATH=/tmp/lm_site:bench timeout 330 python3 bench/optim_llama_evidence.py --work /tmp/ev_$mode \
    --out "$OUT/$mode" --deadline-s 310 --parallel 6 --regimes fresh --seeds 0 1 2 3 4 5 --fresh-steps 400 \
    --held-every 100 --kinds luminav_tdclm_tau0.5 $extra > "$OUT/$mode/evidence.log" 2>&1 &
done
wait
tail -8 "$OUT"/*/evidence.log
