#!/bin/bash
# Session 37 (issue 18), for an H200 only (REQUIRE=H200: ab_setup.sh): main's kernels (Note [programs inside one
# row]) in issue 18's whole benchmark in one run: (1) the Triton GPU suites (TEST_S=0 leaves them out); (2) every case
# at 2^28, nvcc / JIT / AOT / torch's fused AdamW, eager and by replay, the JIT's first step; (3) the TD-CLM cases base
# (main before the note, cc3a24a) / new alternating twice, while AB_MIN seconds are left; (4) the Llama 98M loop with
# torch's fused AdamW, ROUNDS rounds (3). Carry .gpu_bundle, build/aot_s35m, build/aot_s36, build/old_kernels.
set -u
LIMIT=${LIMIT:-575}
source "$(dirname "$0")/ab_setup.sh"
[ "${TEST_S:-150}" -gt 0 ] && LUMINAV_TRITON_AOT_DIR=$(aot new) PYTHONPATH=$(site new) timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider \
  -W ignore tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s"; tail -2 "$OUT/tests.log"
LUMINAV_TRITON_AOT_DIR=$(aot new) PYTHONPATH=$(site new) timeout 120 python3 bench/triton_step_bench.py --reps 30 \
  --replay --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" \
  2>&1 | tee "$OUT/kernel_bench.log" | grep -E "copy|first step|Error|captured"
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
for run in base new base new; do
  [ "$(left)" -lt ${AB_MIN:-200} ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout 60 python3 bench/triton_step_bench.py \
    --skip-compile --replay --reps 20 --cases tdclm_factored_bf16_master tdclm_factored_f32 tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot 2>&1 | grep -E "copy|Error" | sed "s/^/$run /" \
    | tee -a "$OUT/bench_ab.log"
done
echo "A/B done at $(( $(date +%s) - t0 )) s"
[ "$(left)" -gt 60 ] && LUMINAV_TRITON_AOT_DIR=$(aot new) PYTHONPATH=$(site new) timeout $(left) python3 bench/optim_training_loop.py --kinds \
  torch_fused luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot --rounds ${ROUNDS:-3} --reps 20 \
  --json "$OUT/loop.json" 2>&1 | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
echo "all done at $(( $(date +%s) - t0 )) s"
