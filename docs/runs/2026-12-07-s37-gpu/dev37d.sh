#!/bin/bash
# Session 37 (issue 18), the last of the device time, for an H200 only (REQUIRE=H200 leaves at once on another
# card): the TD-CLM cases at 2^28, base (main before Note [programs inside one row], cc3a24a) / new (main)
# alternating twice, nvcc / JIT / AOT, eager and by replay. Carry .gpu_bundle, build/aot_s35m, build/aot_s36,
# build/old_kernels.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
if [ -n "${REQUIRE:-}" ] && ! grep -q "$REQUIRE" "$OUT/gpu.txt"; then echo "not an $REQUIRE: nothing run"; exit 3; fi
t0=$(date +%s)
left() { echo $(( ${LIMIT:-150} - $(date +%s) + t0 )); }
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
OUT=/tmp/build_new bash bench/gpu_suite.sh build 2>&1 | tail -1
rm -rf /tmp/lm_site_base && cp -r /tmp/lm_site /tmp/lm_site_base
cp build/old_kernels/triton_kernels.py /tmp/lm_site_base/luminamoon/optim/triton_kernels.py
site() { [ "$1" = base ] && echo /tmp/lm_site_base || echo /tmp/lm_site; }
aot() { [ "$1" = base ] && echo "$PWD/build/aot_s35m" || echo "$PWD/build/aot_s36"; }
echo "built at $(( $(date +%s) - t0 )) s"
for run in new base new base; do
  [ "$(left)" -lt 25 ] && break
  LUMINAV_TRITON_AOT_DIR=$(aot $run) PYTHONPATH=$(site $run) timeout $(left) python3 bench/triton_step_bench.py \
    --skip-compile --replay --reps 20 --cases tdclm_factored_bf16_master tdclm_factored_f32 tdclm_row_f32 \
    --kinds luminav_nvcc luminav_triton luminav_triton_aot 2>&1 | grep -E "copy|Error" | sed "s/^/$run /" \
    | tee -a "$OUT/bench_ab.log"
done
echo "all done at $(( $(date +%s) - t0 )) s"
