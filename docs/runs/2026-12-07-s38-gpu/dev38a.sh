#!/bin/bash
# Session 38 (issues 14 and 13): the nvcc apply kernel's TD-CLM row/factored second moment, A/B. A is main
# before the change (devA.tar.gz in the repository root: `git archive <base> -- . ':!docs' | gzip > devA.tar.gz`),
# B this tree (Note [groups inside one row], Note [division by an invariant divisor]), C = B with apply tiles of
# 16,384 elements instead of 8,192 (devC.tar.gz, the same way; optional). Carry .gpu_bundle.
# (1) the three built side by side (CUDA only, sm_90); (2) the CUDA GPU suites on B (on C too with TEST_C=1);
# (3) the kernel benchmark at 2^28, nvcc only, A B C twice; (4) Nsight Compute on B's factored bf16 + masters pass 2;
# (5) the Llama 98M loop, torch fused and TD-CLM, B C A alternating, while time is left (LOOP_EXTRA: more arguments
# of bench/optim_training_loop.py, e.g. "--param-dtype bf16").
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LIMIT=${LIMIT:-560}
t0=$(date +%s)
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
if [ -n "${REQUIRE:-}" ] && ! grep -q "$REQUIRE" "$OUT/gpu.txt"; then echo "not an $REQUIRE: nothing run"; exit 3; fi
build() {  # $1 source tree, $2 target site: bench/gpu_suite.sh's build (log: $OUT/build_<site>/build.log)
  OUT=$OUT/build_$(basename $2) LM_SRC=$1 LM_SITE=$2 bash bench/gpu_suite.sh build > /dev/null 2>&1
  echo "build $2 rc=$?"
}
builds="A B"; [ -f devC.tar.gz ] && builds="A B C"  # C only where its tarball was carried
rm -rf /tmp/srcA /tmp/srcC && mkdir /tmp/srcA /tmp/srcC && tar -C /tmp/srcA -xzf devA.tar.gz
build /tmp/srcA /tmp/siteA & build "$PWD" /tmp/siteB &
[ -f devC.tar.gz ] && tar -C /tmp/srcC -xzf devC.tar.gz && build /tmp/srcC /tmp/siteC &
wait
echo "built at $(( $(date +%s) - t0 )) s"
libB=$(find /tmp/siteB -name 'libluminav.so*' | head -1)
[ "${TEST_S:-150}" -gt 0 ] && PYTHONPATH=/tmp/siteB LUMINAV_LIBRARY=$libB timeout ${TEST_S:-150} python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_cuda.py tests/optim/test_gpu_async_step.py \
  tests/optim/test_gpu_sharded.py -rs > "$OUT/tests_B.log" 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|error" "$OUT/tests_B.log" | tail -3
[ "${TEST_C:-0}" -gt 0 ] && PYTHONPATH=/tmp/siteC LUMINAV_LIBRARY=$(find /tmp/siteC -name 'libluminav.so*' | head -1) \
  timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_cuda.py \
  tests/optim/test_gpu_async_step.py > "$OUT/tests_C.log" 2>&1 && echo "tests C passed"; tail -1 "$OUT/tests_C.log" 2>/dev/null
for s in $builds $builds; do
  [ "$(left)" -lt ${BENCH_MIN:-150} ] && break
  PYTHONPATH=/tmp/site$s timeout 70 python3 bench/triton_step_bench.py --skip-compile --replay --reps 20 \
    --cases tdclm_factored_bf16_master tdclm_factored_f32 tdclm_row_f32 tdclm_tensor_f32 clm_f32 \
    --kinds luminav_nvcc --out "$OUT/bench_$s$SECONDS.json" 2>&1 | grep -E "copy|Error" | sed "s/^/$s /" \
    | tee -a "$OUT/bench_ab.log"
done
echo "bench done at $(( $(date +%s) - t0 )) s"
# (4) Nsight Compute on one factored bf16 + masters pass 2 of B (hardware counters; clocks left alone)
[ "$(left)" -gt 120 ] && PYTHONPATH=/tmp/siteB timeout 90 ncu --clock-control none --kernel-name regex:luminav_apply_pbf16 \
  --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section LaunchStats python3 bench/triton_step_bench.py \
  --skip-compile --reps 3 --warmup 1 --cases tdclm_factored_bf16_master --kinds luminav_nvcc > "$OUT/ncu_B.txt" 2>&1
echo "ncu rc=$? at $(( $(date +%s) - t0 )) s"; grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per" "$OUT/ncu_B.txt" | head -12
for s in $(echo $builds | rev) $(echo $builds | rev); do
  [ "$(left)" -lt 70 ] && break
  PYTHONPATH=/tmp/site$s timeout $(( $(left) - 5 )) python3 bench/optim_training_loop.py --kinds torch_fused \
    luminav_tdclm --rounds ${ROUNDS:-2} --reps 20 ${LOOP_EXTRA:-} --json "$OUT/loop_$s$SECONDS.json" 2>&1 \
    | grep -E "^(torch_fused|luminav)|Error|floor" | sed "s/^/$s /" | tee -a "$OUT/loop_ab.log"
done
echo "all done at $(( $(date +%s) - t0 )) s"
