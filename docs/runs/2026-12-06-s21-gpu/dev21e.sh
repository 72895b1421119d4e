#!/bin/bash
# Session 21, call 5: bench/tdclm_crawl_probe.py, plain TD-CLM, seeds 0-2 at once (320 steps): per tensor,
# TD-CLM's step against AdamW's for the same first moment, to find what shrinks during a crawl.
set -u
export OUT=${OUT:-$PWD/gpu_out}
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}  # as the suite sets it
for seed in 0 1 2; do
  PYTHONPATH=/tmp/lm_site:bench timeout 400 python3 bench/tdclm_crawl_probe.py --seed $seed --steps 320 \
    --json "$OUT/crawl_seed$seed.json" > "$OUT/crawl_seed$seed.log" 2>&1 &
done
wait
tail -n 4 "$OUT"/crawl_seed*.log
