#!/usr/bin/env bash
# The CUDA backend's GPU run in one call: environment, the correctness suite
# (tests/optim/test_gpu_cuda.py against the scalar reference), the side-by-side
# benchmark (bench/cuda_step_bench.py) and an Nsight Compute look at the
# kernels. Run from the repository root on a machine with a CUDA GPU:
#   src/optim/cuda/gpu_check.sh [LIBDIR] [tests] [bench] [variants] [build] [torch] [ncu]
# LIBDIR holds libluminav.so (and any libraries it needs that the machine
# lacks); the default is the installed package's. Logs go to $OUT (or ./gpu_out).
set -u
libdir=${1:-}
shift || true
phases=${*:-tests bench ncu}
out=${OUT:-$PWD/gpu_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -n "$libdir" ]; then
  export LUMINAV_LIBRARY=$(cd "$libdir" && pwd)/libluminav.so
  export LD_LIBRARY_PATH=$(cd "$libdir" && pwd):${LD_LIBRARY_PATH:-}
  # The pure-Python package from the source tree (the tests' ctypes helpers
  # import it); the phase `torch` puts the package built here first instead.
  export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
fi
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_capability())'
  [ -n "${LUMINAV_LIBRARY:-}" ] && ldd "$LUMINAV_LIBRARY"
} 2>&1 | tee "$out/env.txt"
run=0
for phase in $phases; do
  run=$((run + 1))
  case $phase in
    tests)
      timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_cuda.py -rs 2>&1 \
        | tee "$out/pytest.log" | tail -40 ;;
    bench)
      timeout 200 python3 bench/cuda_step_bench.py --out "$out/bench$run.json" 2>&1 | tee "$out/bench$run.log" ;;
    variants)
      # Kernel builds that differ in one knob (kernels.cu), as artifact
      # directories: the same library loads each through LUMINAV_CUDA_KERNEL_DIR.
      for dir in "${VARIANTS_DIR:-.gpu_bundle/variants}"/*/; do
        echo "== variant $(basename "$dir")"
        LUMINAV_CUDA_KERNEL_DIR=$dir timeout 90 python3 bench/cuda_step_bench.py \
          --only clm,clm_nocheck,tdclm,clm_bf16_master --reps 15
      done 2>&1 | tee "$out/variants.log" | grep -E "==|luminav" ;;
    build)
      # The Python package built on this machine (its python3 differs from the
      # one the library was built with), for tests/optim/test_gpu_torch.py and
      # tests/optim/test_optim_cuda_frontend.py.
      # GPU_DEPS_PREFIX holds simdjson and OpenSSL when the machine lacks them.
      prefix=${GPU_DEPS_PREFIX:-$PWD/.gpu_bundle/prefix}
      export LD_LIBRARY_PATH=$prefix/lib:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
      timeout 400 python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/lm_site \
        -Cbuild-dir=/tmp/lm_build -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
        -Ccmake.define.LUMINA_WITH_VULKAN=OFF "-Ccmake.define.LUMINA_CUDA_ARCHS=90;PTX" \
        -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
        -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/libcrypto.so" . > "$out/build.log" 2>&1
      echo "build rc=$?"; grep -E "LuminaMoon:|rror" "$out/build.log" | head -30 ;;
    torch)
      PYTHONPATH=/tmp/lm_site timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_torch.py \
        tests/optim/test_optim_cuda_frontend.py -rs 2>&1 | tee "$out/pytest_torch.log" | tail -30 ;;
    ncu)
      timeout 130 ncu --clock-control none -k regex:"luminav_(apply|reduce)" -c 4 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
        python3 bench/cuda_step_bench.py --only clm,clm_bf16_master --warmup 0 --reps 1 2>&1 | tee "$out/ncu.log" | tail -120 ;;
  esac
done
