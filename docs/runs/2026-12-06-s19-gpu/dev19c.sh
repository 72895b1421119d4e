#!/usr/bin/env bash
# session 19 call 3: the factor kernels. A = main (git archive HEAD), B1 = the working tree (column sums with eight
# loads in flight; factor sums 2 rows in flight as before), B2 = B1 with 4 rows in flight (80 registers, 3 blocks/SM),
# (B3, B2 held to 4 blocks/SM, dropped for time). GPU tests, per-kernel profile, then the TD-CLM loop.
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT; export PYTHONUNBUFFERED=1
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/env.txt
build() {  # $1 source dir, $2 site
  rm -rf $2 $2.build
  timeout 400 python3 -m pip install -q --no-build-isolation --no-deps --target $2 \
    -Cbuild-dir=$2.build -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
    -Ccmake.define.LUMINA_WITH_VULKAN=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
    -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
    -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
    -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" $1 > $OUT/build_$(basename $2).log 2>&1
  echo "build $2 rc=$?"
}
src() { rm -rf $1 && mkdir $1 && tar -C . --exclude=./.git --exclude=./docs --exclude=./.gpu_bundle -cf - . | tar -C $1 -xf -; }
rm -rf /tmp/srcA && mkdir /tmp/srcA && tar -C /tmp/srcA -xzf devA.tar.gz
src /tmp/srcB2; sed -i 's/^#define LUMINAV_CUDA_FACTOR_ROWS_IN_FLIGHT 2$/#define LUMINAV_CUDA_FACTOR_ROWS_IN_FLIGHT 4/' /tmp/srcB2/src/optim/cuda/kernels.cu
grep -c "IN_FLIGHT 4" /tmp/srcB2/src/optim/cuda/kernels.cu
t0=$(date +%s)
build /tmp/srcA /tmp/siteA & build $PWD /tmp/siteB1 & build /tmp/srcB2 /tmp/siteB2 & wait
echo "builds $(( $(date +%s) - t0 )) s"
for s in B1 B2; do
  lib=$(find /tmp/site$s -name 'libluminav.so*' | head -1)
  sel=""; [ $s != B1 ] && sel="-k tdclm or factor or td_"
  PYTHONPATH=/tmp/site$s LUMINAV_LIBRARY=$lib timeout 90 python3 -m pytest -q -p no:cacheprovider -o addopts= \
    tests/optim/test_gpu_cuda.py tests/optim/test_gpu_async_step.py ${sel:+"$sel"} > $OUT/pytest_$s.txt 2>&1
  echo "tests $s: $(tail -1 $OUT/pytest_$s.txt)"
done
echo "tests done $(( $(date +%s) - t0 )) s"
for s in A B1 B2; do
  echo "=== profile $s"
  PYTHONPATH=/tmp/site$s:bench timeout 60 python3 dev18_prof.py luminav_tdclm 2>&1 | grep -v -i warn | head -12 | tee -a $OUT/prof.txt
done
echo "profiles done $(( $(date +%s) - t0 )) s"
for s in B1 A B2 B2 A B1; do
  [ $(( $(date +%s) - t0 )) -gt 120 ] && break
  PYTHONPATH=/tmp/site$s:bench timeout 60 python3 bench/optim_training_loop.py --json $OUT/loop_$s$SECONDS.json \
    --kinds torch_fused luminav_tdclm --rounds 2 --reps 20 > $OUT/loop_$s$SECONDS.txt 2>&1
  echo "loop $s: $(grep '^luminav_tdclm ' $OUT/loop_$s$SECONDS.txt | cut -c1-120)"
done
echo "t=$(( $(date +%s) - t0 )) s"
