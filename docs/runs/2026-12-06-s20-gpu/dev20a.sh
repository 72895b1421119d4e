#!/usr/bin/env bash
# session 20 device call: main as it stands, on the H200 (host-bound torch): the Llama 98M loop
# (issue 13 L1-L3, issue 14 T2, issue 18 end-to-end), then the GPU suites if time is left.
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
export PYTHONUNBUFFERED=1
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/env.txt
nproc >> $OUT/env.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/env.txt
t0=$(date +%s)
site=/tmp/site
rm -rf $site $site.build
timeout 300 python3 -m pip install -q --no-build-isolation --no-deps --target $site \
  -Cbuild-dir=$site.build -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
  -Ccmake.define.LUMINA_WITH_VULKAN=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
  -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
  -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
  -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" . > $OUT/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s"
PYTHONPATH=$site:bench timeout 330 python3 bench/optim_training_loop.py --json $OUT/loop.json \
  --kinds torch_fused torch_fused_capturable luminav luminav_tdclm luminav_triton luminav_tdclm_triton \
  --rounds 5 --reps 20 --paired-windows 40 --paired-steps 5 2>&1 | grep -v Warn > $OUT/loop.log
echo "loop rc=$? $(( $(date +%s) - t0 )) s"; tail -40 $OUT/loop.log
left=$(( 480 - ($(date +%s) - t0) ))
if [ $left -gt 30 ]; then
  PYTHONPATH=$site:bench timeout $left python3 dev20_probe.py torch_fused luminav luminav_tdclm 2>&1 | grep -v Warn > $OUT/probe.log
  echo "probe rc=$? $(( $(date +%s) - t0 )) s"; cat $OUT/probe.log | tail -5
fi
left=$(( 575 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  lib=$(find $site -name 'libluminav.so*' | head -1)
  PYTHONPATH=$site LUMINAV_LIBRARY=$lib timeout $left python3 -m pytest -q -p no:cacheprovider -o addopts= \
    tests/optim/test_gpu_cuda.py tests/optim/test_gpu_async_step.py tests/optim/test_gpu_step_graph.py \
    > $OUT/pytest.log 2>&1
  echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -4 $OUT/pytest.log
fi
