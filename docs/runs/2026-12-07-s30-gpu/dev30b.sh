#!/bin/bash
# Session 30, call 3: the asynchronous step's GPU tests and a profile of the Llama step's kernels (any card), then, on an H200 only, issue 18's factored pass 2 in segments
# (branch triton-factored-segments: its kernels file carried as build/new_optim/triton_kernels.py, its AOT set as
# build/aot_s29_new) against main's kernels (build/aot_s29_old): the kernel benchmark at 2^28 in two rounds each,
# the order alternated (old, new, new, old); the Triton JIT GPU tests on the branch's kernels (the
# user's loop left out for the device time left).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# On any card first: the asynchronous step's tests, now parametrized over cuda and triton-aot.
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_old PYTHONPATH=/tmp/lm_site timeout 120 python3 -m pytest -q -p no:cacheprovider \
  -o addopts= tests/optim/test_gpu_async_step.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$OUT/pytest_async.log" | tail -6
echo "async tests done at $(( $(date +%s) - t0 )) s"
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_old PYTHONPATH=/tmp/lm_site timeout 100 python3 \
  docs/runs/2026-12-07-s30-gpu/profile_aot_step.py 2>&1 | tee "$OUT/profile.log" | tail -30
echo "profile done at $(( $(date +%s) - t0 )) s"
if ! grep -q H200 "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new && cp build/new_optim/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
site_of() { [ "$1" = new ] && echo /tmp/lm_site_new || echo /tmp/lm_site; }
bench() {  # $1 old|new, $2 round
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_$1 PYTHONPATH=$(site_of $1) timeout 100 python3 bench/triton_step_bench.py \
    --reps 30 --replay --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master \
    --kinds luminav_triton luminav_triton_aot --out "$OUT/bench_$1_$2.json" 2>&1 | sed "s/^/$1 r$2 /" \
    | tee -a "$OUT/bench.log" | grep -E "copy|Error|captured"
}
bench old 1; bench new 1; bench new 2; bench old 2
echo "bench done at $(( $(date +%s) - t0 )) s"
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
PYTHONPATH=/tmp/lm_site_new LUMINAV_LIBRARY=$lib timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  tests/optim/test_gpu_triton.py -rs 2>&1 | tee "$OUT/pytest_jit_new.log" | tail -6
echo "all done at $(( $(date +%s) - t0 )) s"
