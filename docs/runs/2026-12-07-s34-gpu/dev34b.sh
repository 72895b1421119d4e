#!/bin/bash
# Session 34, call 1 (issue 18): session 33's unmeasured work, main then branch triton-aot-i32-sums.
# Main (f1cfa48; AOT set build/aot_s34m from it): 1. test_gpu_triton_aot.py with the C-program test (a C99 program
# drives the AOT kernels); 2. the TD-CLM tensor step at 2^28, nvcc / JIT / AOT, twice (does the finalize mend,
# 517621d, bring the JIT to the AOT's 2.18 ms?); 3. with PROFILE=1, the tensor step per kernel under torch.profiler
# (the JIT finalize took 86.6 us, the AOT's 18.7, in session 33's call 4).
# Branch (its tree as build/i32_src from `git archive`, AOT set build/aot_s34i): 4. test_gpu_triton_aot.py;
# 5. the factored cases at 2^28, AOT, branch / main alternating twice.
# Carry .gpu_bundle, build/aot_s34m, build/aot_s34i, build/i32_src.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
left() { echo $(( ${LIMIT:-575} - $(date +%s) + t0 )); }  # LIMIT: the device time this call may use
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
OUT=/tmp/build_main bash bench/gpu_suite.sh build 2>&1 | tail -2
rm -rf /tmp/lm_site_main && cp -r /tmp/lm_site /tmp/lm_site_main
main_env() { PYTHONPATH=/tmp/lm_site_main LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s34m \
  LUMINAV_LIBRARY=$(find /tmp/lm_site_main -name 'libluminav.so*' | head -1) "$@"; }
main_env timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py -rs \
  2>&1 | tee "$OUT/pytest_aot_main.log" | tail -3
echo "main tests done at $(( $(date +%s) - t0 )) s"
for run in 1 2; do
  main_env timeout 90 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile --cases tdclm_tensor_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot 2>&1 | sed "s/^/$run /" | tee -a "$OUT/tensor_step.log" \
    | grep -E "of copy|Error"
done
[ "${PROFILE:-0}" = 1 ] && main_env timeout 90 python3 docs/runs/2026-12-07-s33-gpu/tensor_profile.py 2>&1 | grep -v -i warn \
  | tee "$OUT/tensor_profile.log"
echo "main done at $(( $(date +%s) - t0 )) s"
if [ "$(left)" -lt 150 ]; then echo "the branch left out: $(left) s left"; else
ln -sfn "$PWD/.gpu_bundle" build/i32_src/.gpu_bundle
(cd build/i32_src && OUT=/tmp/build_i32 bash bench/gpu_suite.sh build 2>&1 | tail -1)
i32_env() { PYTHONPATH=/tmp/lm_site LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s34i \
  LUMINAV_LIBRARY=$(find /tmp/lm_site -name 'libluminav.so*' | head -1) "$@"; }
(cd build/i32_src && i32_env timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$OUT/pytest_aot_i32.log" | tail -3)
echo "branch tests done at $(( $(date +%s) - t0 )) s"
for run in i32 main i32 main; do
  [ "$(left)" -lt 60 ] && break
  env=i32_env; [ $run = main ] && env=main_env
  $env timeout $(( $(left) < 90 ? $(left) : 90 )) python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
    --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 --kinds luminav_nvcc luminav_triton_aot 2>&1 \
    | sed "s/^/$run /" | tee -a "$OUT/factored_ab.log" | grep -E "of copy|Error"
done
fi
echo "all done at $(( $(date +%s) - t0 )) s"
