#!/usr/bin/env bash
# session 18 device call: build main (A) and the change (B: 128 slots a launch), the GPU tests on B,
# the per-kernel profile of opt.step() in the Llama 98M loop for both, then the loop A/B alternating
# A is main at the call: `git archive HEAD -- . ':!docs' | gzip > devA.tar.gz` in the repository root before the call
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
export PYTHONUNBUFFERED=1
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/env.txt
build() {  # $1 source dir, $2 site, $3 extra C++ flags
  rm -rf $2 $2.build
  timeout 400 python3 -m pip install -q --no-build-isolation --no-deps --target $2 \
    -Cbuild-dir=$2.build -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
    -Ccmake.define.LUMINA_WITH_VULKAN=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
    -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
    -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
    -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" "-Ccmake.define.CMAKE_CXX_FLAGS=${3:-}" $1 > $OUT/build_$(basename $2).log 2>&1
  echo "build $2 rc=$?"
}
rm -rf /tmp/srcA && mkdir /tmp/srcA && tar -C /tmp/srcA -xzf devA.tar.gz
t0=$(date +%s)
build /tmp/srcA /tmp/siteA & build $PWD /tmp/siteB & wait
echo "builds $(( $(date +%s) - t0 )) s"
libB=$(find /tmp/siteB -name 'libluminav.so*' | head -1)
PYTHONPATH=/tmp/siteB LUMINAV_LIBRARY=$libB timeout 90 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  tests/optim/test_gpu_cuda.py tests/optim/test_gpu_async_step.py \
  2>&1 | tee $OUT/pytest_B.log | tail -6
echo "tests done $(( $(date +%s) - t0 )) s"
for s in A B; do
  echo "=== profile $s"
  PYTHONPATH=/tmp/site$s:bench timeout 70 python3 dev18_prof.py luminav luminav_tdclm 2>&1 | tee $OUT/prof_$s.log | grep -v Warn
done
echo "profiles done $(( $(date +%s) - t0 )) s"
for s in B A; do
  [ $(( $(date +%s) - t0 )) -gt 330 ] && break
  echo "=== loop $s"
  PYTHONPATH=/tmp/site$s:bench timeout 120 python3 bench/optim_training_loop.py --json $OUT/loop_$s$SECONDS.json \
    --kinds torch_fused luminav luminav_tdclm --rounds 2 --reps 20 2>&1 | tee -a $OUT/loop_$s.log | tail -12
  echo "t=$(( $(date +%s) - t0 )) s"
done
