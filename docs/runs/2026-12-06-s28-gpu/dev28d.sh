#!/bin/bash
# Session 28, call 4 (an H100, after the H200 failed to start five times): the GPU correctness of the kernels of the
# commit after 9e9f653 (the Triton GPU tests, JIT and triton-aot with the CPU-built sm_90 kernels of build/aot_s28),
# then one more round of issue 18's kernels at 2^28, these kernels and main's (the order: old, then new).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s28 PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout 200 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 \
  | tee "$OUT/pytest.log" | tail -8
echo "tests done at $(( $(date +%s) - t0 )) s"
rm -rf /tmp/lm_site_old && cp -r /tmp/lm_site /tmp/lm_site_old && cp build/old_optim/triton_kernels.py /tmp/lm_site_old/luminamoon/optim/
for v in old new; do
  site=/tmp/lm_site aot=$PWD/build/aot_s28; [ $v = old ] && site=/tmp/lm_site_old aot=$PWD/build/aot_s28_old
  LUMINAV_TRITON_AOT_DIR=$aot PYTHONPATH=$site timeout 90 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master clm_f32 --kinds luminav_triton \
    luminav_step_triton_aot --out "$OUT/bench_$v.json" 2>&1 | sed "s/^/$v /" | tee -a "$OUT/bench.log" | grep -E "copy|replay|aot|Error"
done
echo "all done at $(( $(date +%s) - t0 )) s"
