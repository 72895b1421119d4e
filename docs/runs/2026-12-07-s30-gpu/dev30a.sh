#!/bin/bash
# Session 30, call 2 (any card): the triton-aot asynchronous step made capturable (Note [triton-aot capture]):
# the package built, the AOT GPU tests (capture and workspace tests new), the kernel benchmark at 2^28 with graph
# replay (nvcc, Triton JIT, triton-aot async, triton-aot luminav_step), then the user's loop (Llama 98M, TD-CLM).
# On an H200 also the factored-segments kernels (branch triton-factored-segments: build/new_optim/triton_kernels.py,
# build/aot_s29_new) in the kernel benchmark beside main's (build/aot_s29_old).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
h200=0; grep -q H200 "$OUT/gpu.txt" && h200=1
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_old PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$OUT/pytest_aot.log" | tail -15
echo "aot tests done at $(( $(date +%s) - t0 )) s"
bench() {  # $1 old|new, $2 kinds
  local site=/tmp/lm_site
  if [ "$1" = new ]; then
    rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new && cp build/new_optim/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
    site=/tmp/lm_site_new
  fi
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_$1 PYTHONPATH=$site timeout 120 python3 bench/triton_step_bench.py \
    --reps 30 --replay --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master \
    --kinds $2 --out "$OUT/bench_$1.json" 2>&1 | sed "s/^/$1 /" | tee -a "$OUT/bench.log" | grep -E "copy|Error|captured"
}
bench old "luminav_nvcc luminav_triton luminav_triton_aot luminav_step_triton_aot"
echo "bench done at $(( $(date +%s) - t0 )) s"
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_old PYTHONPATH=/tmp/lm_site timeout 170 python3 bench/optim_training_loop.py \
  --kinds torch_fused luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 2 --reps 20 \
  --json "$OUT/loop.json" 2>&1 | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
echo "loop done at $(( $(date +%s) - t0 )) s"
[ $h200 = 1 ] && bench new "luminav_triton luminav_step_triton_aot" && bench old "luminav_triton luminav_step_triton_aot"
echo "all done at $(( $(date +%s) - t0 )) s"
