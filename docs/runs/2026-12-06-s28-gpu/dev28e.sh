#!/bin/bash
# Session 28: the A/B to repeat on an H200 (written for the last 290 s of device time, which were too few to start a
# machine; whichever card comes): the build, then on
# an H200 issue 18's kernels at 2^28 first (these kernels and main's, two rounds, the order alternated: the figure
# the H100 of call 1 cannot give), then the Triton GPU tests (JIT and triton-aot, build/aot_s28); on an H100 the
# tests first.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -2
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_old && cp -r /tmp/lm_site /tmp/lm_site_old && cp build/old_optim/triton_kernels.py /tmp/lm_site_old/luminamoon/optim/
bench() {  # $1 new|old, $2 round
  local site=/tmp/lm_site aot=$PWD/build/aot_s28
  [ "$1" = old ] && site=/tmp/lm_site_old aot=$PWD/build/aot_s28_old
  LUMINAV_TRITON_AOT_DIR=$aot PYTHONPATH=$site timeout 60 python3 bench/triton_step_bench.py --reps 30 --replay \
    --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master --kinds luminav_triton luminav_step_triton_aot \
    --out "$OUT/bench_$1_$2.json" 2>&1 | sed "s/^/$1 r$2 /" | tee -a "$OUT/bench.log" | grep -E "copy|replay|aot|Error"
}
tests() {
  lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s28 PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout $1 python3 -m pytest -q \
    -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 \
    | tee "$OUT/pytest.log" | tail -6
  echo "tests done at $(( $(date +%s) - t0 )) s"
}
if grep -q H200 "$OUT/gpu.txt"; then
  bench new 1; bench old 1; bench old 2; bench new 2
  echo "bench done at $(( $(date +%s) - t0 )) s"
  tests 120
else
  tests 150
  bench old 1; bench new 1
fi
echo "all done at $(( $(date +%s) - t0 )) s"
