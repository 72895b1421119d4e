#!/bin/bash
# Session 29, call 3 (right after call 2, an H200 only): the user's loop on the branch's kernels (issue 18's
# factored pass 2 in segments; call 2 ran main's), then the Triton JIT tests on them. Builds first when the
# machine is a fresh one.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
if ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
t0=$(date +%s)
[ -d /tmp/lm_site/luminamoon ] || bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new && cp build/new_optim/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
for site in new old; do
  d=/tmp/lm_site_$site; [ $site = old ] && d=/tmp/lm_site
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_$site PYTHONPATH=$d timeout 150 python3 bench/optim_training_loop.py \
    --kinds torch_fused luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 2 --reps 20 --json "$OUT/loop_$site.json" \
    2>&1 | sed "s/^/$site /" | tee "$OUT/loop_$site.log" | grep -E "^$site (torch_fused|luminav)|Error|floor"
  echo "loop $site done at $(( $(date +%s) - t0 )) s"
done
PYTHONPATH=/tmp/lm_site_new LUMINAV_LIBRARY=$lib timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  tests/optim/test_gpu_triton.py -rs 2>&1 | tee "$OUT/pytest_jit_new.log" | tail -6
echo "all done at $(( $(date +%s) - t0 )) s"
