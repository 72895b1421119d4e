#!/bin/bash
# Session 37 (issue 18), the last of the device time, for an H200 only (REQUIRE=H200: ab_setup.sh): the TD-CLM
# cases at 2^28, base (main before Note [programs inside one row], cc3a24a) / new (main) alternating twice, nvcc /
# JIT / AOT, eager and by replay. Carry .gpu_bundle, build/aot_s35m, build/aot_s36, build/old_kernels.
set -u
LIMIT=${LIMIT:-150}
source "$(dirname "$0")/ab_setup.sh"
for run in new base new base; do
  [ "$(left)" -lt 25 ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout $(left) python3 bench/triton_step_bench.py \
    --skip-compile --replay --reps 20 --cases tdclm_factored_bf16_master tdclm_factored_f32 tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot 2>&1 | grep -E "copy|Error" | sed "s/^/$run /" \
    | tee -a "$OUT/bench_ab.log"
done
echo "all done at $(( $(date +%s) - t0 )) s"
