#!/bin/bash
# Session 28, call 2 (the warm H200 of call 1, its build reused; rebuilt if the machine is fresh): the Triton GPU
# tests (JIT, and triton-aot with the CPU-built sm_90 kernels of build/aot_s28), then the Llama 98M loop's
# TD-CLM Triton step with these kernels and with main's (two processes, the same build).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
if [ -z "${ALLOW_H100:-}" ] && ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build 2>&1 | tail -5
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
[ -d /tmp/lm_site_old/luminamoon ] || { cp -r /tmp/lm_site /tmp/lm_site_old && cp build/old_optim/triton_kernels.py /tmp/lm_site_old/luminamoon/optim/; }
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s28 PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout 240 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 \
  | tee "$OUT/pytest.log" | tail -12
for v in new old; do
  site=/tmp/lm_site; [ $v = old ] && site=/tmp/lm_site_old
  PYTHONPATH=$site timeout 150 python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm_triton luminav_tdclm \
    --rounds 2 --reps 20 --json "$OUT/loop_$v.json" 2>&1 | sed "s/^/$v /" | tee -a "$OUT/loop.log" | tail -8
done
