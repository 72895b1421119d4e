#!/usr/bin/env bash
set -u
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/card.txt"
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build 2>&1 | tail -3
python3 -c "import torch; x=torch.empty(1<<28, device='cuda'); y=torch.empty_like(x); import time
s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
for _ in range(3): y.copy_(x)
s.record(); [y.copy_(x) for _ in range(10)]; e.record(); torch.cuda.synchronize(); print('copy GB/s', 8*(1<<28)*10/(s.elapsed_time(e)*1e-3)/1e9)"
PYTHONPATH=/tmp/lm_site timeout 400 python3 dev17_sweep.py 2>&1 | grep -v -i warn | tee "$OUT/sweep.log"
echo "done at $(( $(date +%s) - t0 )) s"
