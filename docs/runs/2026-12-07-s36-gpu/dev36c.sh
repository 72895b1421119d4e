#!/bin/bash
# Session 36 (issue 18): Note [programs inside one row] (a pass-2 program inside one row loads its row factor
# once and its column factors as a run) against main before it. (1) the Triton GPU tests on the new kernels;
# (2) the kernel benchmark's TD-CLM cases at 2^28 (factored bf16 + masters, factored fp32, row fp32), JIT, AOT
# and nvcc, eager and by replay, base / new alternating twice; (3) with time left, the Llama 98M loop's TD-CLM
# step on the JIT and the AOT, base / new. Base: main's kernels before it (build/old_kernels/triton_kernels.py
# in the package; AOT set build/aot_s35m); new: this tree (AOT set build/aot_s36). The C++ is the same.
# Carry .gpu_bundle, build/aot_s35m, build/aot_s36, build/old_kernels.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
left() { echo $(( ${LIMIT:-540} - $(date +%s) + t0 )); }
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
OUT=/tmp/build_new bash bench/gpu_suite.sh build 2>&1 | tail -1
rm -rf /tmp/lm_site_base && cp -r /tmp/lm_site /tmp/lm_site_base
cp build/old_kernels/triton_kernels.py /tmp/lm_site_base/luminamoon/optim/triton_kernels.py
site() { [ "$1" = base ] && echo /tmp/lm_site_base || echo /tmp/lm_site; }
aot() { [ "$1" = base ] && echo "$PWD/build/aot_s35m" || echo "$PWD/build/aot_s36"; }
LUMINAV_TRITON_AOT_DIR=$(aot new) PYTHONPATH=$(site new) timeout ${TEST_S:-110} python3 -m pytest -q -x -p no:cacheprovider \
  tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py 2>&1 | tail -4 | tee "$OUT/tests.log"
echo "tests done at $(( $(date +%s) - t0 )) s"
for run in base new base new; do
  [ "$(left)" -lt 60 ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout $(left) python3 bench/triton_step_bench.py \
    --skip-compile --replay --reps 20 --cases tdclm_factored_bf16_master tdclm_factored_f32 tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot --out "$OUT/bench_$run.json" 2>&1 \
    | grep -E "copy|Error" | sed "s/^/$run /" | tee -a "$OUT/bench_ab.log"
done
echo "bench done at $(( $(date +%s) - t0 )) s"
for run in base new; do
  [ "$(left)" -lt 70 ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout $(left) python3 bench/optim_training_loop.py \
    --kinds luminav_tdclm_triton_aot luminav_tdclm_triton --rounds 1 --reps 20 --json "$OUT/loop_$run.json" 2>&1 \
    | grep -E "^(luminav)|Error" | sed "s/^/$run /" | tee -a "$OUT/loop_ab.log"
done
echo "all done at $(( $(date +%s) - t0 )) s"
