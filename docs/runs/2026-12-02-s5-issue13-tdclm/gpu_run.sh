#!/usr/bin/env bash
# Issue 13 (session 5): the CUDA TD-CLM kernels before (the lead's main) and after (this branch)
# in one device call. From the lead's checkout root, this branch unpacked under .carry/wt13t:
#   bash .carry/wt13t/docs/runs/2026-12-02-s5-issue13-tdclm/gpu_run.sh [build] [ab] [tests] [loop]
# Builds as bench/gpu_suite.sh does (main -> /tmp/lm_site_main, branch -> /tmp/lm_site, at once),
# then bench/cuda_tdclm_step_bench.py alternating builds, the GPU tests on the branch, the loop.
set -u
phases=${*:-build ab tests loop}
root=$PWD
mine=$root/.carry/wt13t
out=${OUT:-$PWD/gpu_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
prefix=$root/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
build() {  # tree site build_dir log
  rm -rf "$2" "$3"
  local t0=$(date +%s)
  (cd "$1" && timeout 300 python3 -m pip install -q --no-build-isolation --no-deps --target "$2" \
    -Cbuild-dir="$3" -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
    -Ccmake.define.LUMINA_WITH_VULKAN=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
    -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
    -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
    -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" . > "$4" 2>&1)
  local rc=$?
  echo "build $1 rc=$rc in $(( $(date +%s) - t0 )) s"; grep -E "rror" "$4" | head -10
}
lib_of() { find "$1" -name 'libluminav.so*' | head -1; }
bench() {  # site label
  PYTHONPATH=$1:$mine/bench LUMINAV_LIBRARY=$(lib_of "$1") timeout 90 python3 $mine/bench/cuda_tdclm_step_bench.py \
    --label "$2" --json "$out/ab_$2.json" ${3:-} 2>&1 | tee -a "$out/ab.log" | grep -v "^$"
}
for phase in $phases; do
  t0=$(date +%s)
  case $phase in
    build)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/env.txt"
      build "$mine" /tmp/lm_site /tmp/lm_build "$out/build_after.log" &
      build "$root" /tmp/lm_site_main /tmp/lm_build_main "$out/build_before.log" &
      wait ;;
    ab)
      bench /tmp/lm_site_main before1
      bench /tmp/lm_site after1 --triton
      bench /tmp/lm_site_main before2
      bench /tmp/lm_site after2 ;;
    tests)
      (cd "$mine" && NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
       PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$(lib_of /tmp/lm_site) timeout 200 python3 -m pytest -q \
       -p no:cacheprovider -o addopts= tests/optim/test_gpu_cuda.py tests/optim/test_gpu_torch.py \
       tests/optim/test_gpu_async_step.py tests/optim/test_gpu_step_graph.py tests/optim/test_gpu_sharded.py \
       -rs 2>&1 | tee "$out/pytest.log" | tail -25) ;;
    loop)
      (cd "$mine" && PYTHONPATH=/tmp/lm_site timeout 200 python3 bench/optim_training_loop.py --json "$out/loop.json" \
       ${LOOP_ARGS:---kinds torch_fused luminav luminav_tdclm --rounds 3} 2>&1 | tee "$out/loop.log" | tail -12) ;;
  esac
  echo "phase $phase: $(( $(date +%s) - t0 )) s"
done
