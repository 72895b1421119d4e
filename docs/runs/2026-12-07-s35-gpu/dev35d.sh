#!/bin/bash
# Session 35 (issue 18), on branch triton-aot-i32-sums (the one-tensor sums kernels take R and C as i32; AOT set
# build/aot_s35i) against main (its tree as build/main_src, `git archive main CMakeLists.txt cmake include src python
# pyproject.toml README.md bench/gpu_suite.sh`; AOT set build/aot_s35m), on whichever card comes:
# 1. the branch's test_gpu_triton_aot.py (its new refusal test, the C-program test);
# 2. the factored and row cases at 2^28, nvcc / JIT / AOT, branch and main alternating twice;
# 3. on an H200 only, with the time left: main's GPU suites, issue 18's kernel benchmark (every case) and the
#    Llama 98M loop, five rounds (dev35c.sh's steps, on main's build).
# Carry .gpu_bundle, build/aot_s35m, build/aot_s35i, build/main_src.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
left() { echo $(( ${LIMIT:-580} - $(date +%s) + t0 )); }
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ln -sfn "$PWD/.gpu_bundle" build/main_src/.gpu_bundle
(cd build/main_src && OUT=/tmp/build_main bash bench/gpu_suite.sh build 2>&1 | tail -1)
rm -rf /tmp/lm_site_main && cp -r /tmp/lm_site /tmp/lm_site_main
OUT=/tmp/build_i32 bash bench/gpu_suite.sh build 2>&1 | tail -1
site_env() {  # site AOT-set command...
  local site=$1 aot=$2; shift 2
  PYTHONPATH=$site LUMINAV_TRITON_AOT_DIR=$PWD/$aot LUMINAV_LIBRARY=$(find $site -name 'libluminav.so*' | head -1) "$@"
}
site_env /tmp/lm_site build/aot_s35i timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$OUT/pytest_aot_i32.log" | tail -2
echo "branch tests done at $(( $(date +%s) - t0 )) s"
for run in i32 main i32 main; do
  [ "$(left)" -lt 60 ] && break
  site=/tmp/lm_site aot=build/aot_s35i; [ $run = main ] && site=/tmp/lm_site_main aot=build/aot_s35m
  site_env $site $aot timeout 90 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
    --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot 2>&1 | sed "s/^/$run /" | tee -a "$OUT/factored_ab.log" \
    | grep -E "of copy|Error"
done
echo "A/B done at $(( $(date +%s) - t0 )) s"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: the rest left out"; exit 0; }
site_env /tmp/lm_site_main build/aot_s35m timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_step_graph.py tests/optim/test_gpu_cuda.py \
  tests/optim/test_gpu_triton.py -rs 2>&1 | tee "$OUT/pytest_main.log" | tail -1
site_env /tmp/lm_site_main build/aot_s35m timeout 120 python3 bench/triton_step_bench.py --reps 30 --replay \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|first step|Error|captured"
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
site_env /tmp/lm_site_main build/aot_s35m timeout $(left) python3 bench/optim_training_loop.py --kinds torch_fused \
  luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 5 --reps 20 --json "$OUT/loop.json" 2>&1 \
  | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
echo "all done at $(( $(date +%s) - t0 )) s"
