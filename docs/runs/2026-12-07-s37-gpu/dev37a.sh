#!/bin/bash
# Session 37 (issue 18), on an H200 if one comes: (1) the Triton GPU suites on main's kernels (Note [programs inside
# one row]) with a budget of minutes; (2) the kernel benchmark's TD-CLM cases at 2^28, base (main before the note,
# cc3a24a) / new (main) alternating twice, JIT, AOT and nvcc, eager and by replay; (3) with time left, the Llama 98M
# loop's TD-CLM step, base / new. Carry .gpu_bundle, build/aot_s35m, build/aot_s36, build/old_kernels.
set -u
LIMIT=${LIMIT:-570}
source "$(dirname "$0")/ab_setup.sh"
LUMINAV_TRITON_AOT_DIR=$(aot new) PYTHONPATH=$(site new) timeout ${TEST_S:-240} python3 -m pytest -q -p no:cacheprovider \
  -W ignore --durations=5 tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s"; tail -12 "$OUT/tests.log"
for run in new base new base; do
  [ "$(left)" -lt 60 ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout $(left) python3 bench/triton_step_bench.py \
    --skip-compile --replay --reps 20 --cases tdclm_factored_bf16_master tdclm_factored_f32 tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot --out "$OUT/bench_$run.json" 2>&1 \
    | grep -E "copy|Error" | sed "s/^/$run /" | tee -a "$OUT/bench_ab.log"
done
echo "bench done at $(( $(date +%s) - t0 )) s"
for run in new base; do
  [ "$(left)" -lt 70 ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout $(left) python3 bench/optim_training_loop.py \
    --kinds luminav_tdclm_triton_aot luminav_tdclm_triton --rounds 1 --reps 20 --json "$OUT/loop_$run.json" 2>&1 \
    | grep -E "^(luminav)|Error" | sed "s/^/$run /" | tee -a "$OUT/loop_ab.log"
done
echo "all done at $(( $(date +%s) - t0 )) s"
