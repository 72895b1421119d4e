#!/usr/bin/env bash
# Issue 18's GPU run in one device call, from the root of a copy of the branch
# (the lead's checkout carries it as .carry/wt18 beside .gpu_bundle): build the
# package there (nvcc kernels for sm_90; the Triton AOT kernels come prebuilt
# from the CPU machine in ./aot, which is the point: built without a GPU), run
# the C++ AOT test (its kernels launched from C++, no Python), the GPU Triton
# tests, the kernel benchmark and the end-to-end training loop.
#   bash bench/triton_gpu_run.sh [build] [aot] [tests] [aottests] [bench] [aotbench] [sweep] [loop]
#                                [loopreplay] [hostprofile] [loopab] [loopold] [hostprofileold]
#                                [tdtests] [tdbench] [s6tests] [s6bench] [s6sweep]
# tdtests / tdbench (session 5): the triton-aot backend's tests (TD-CLM factored/row/tensor and CLM)
# and TD-CLM at 16384 x 16384 side by side (nvcc async, Triton JIT, luminav_step on triton-aot).
# s6tests / s6bench / s6sweep (session 6, Note [Triton factor tiles]): the JIT and triton-aot GPU tests;
# TD-CLM at 16384 x 16384 (factored fp32 and bf16 + masters, row, tensor) with the nvcc step, the JIT
# (both also as CUDA-graph replays), luminav_step on triton-aot and the copy, in two processes (the
# spread); the JIT's factor-sums tile (rows per load, warps) on factored fp32.
# loopold / hostprofileold: the loop and the host profile with an earlier Python package over the
# same build (./old_optim/*.py replacing luminamoon/optim's files: the A/B of a host-side change).
# At most 8 files come back from $OUT.
set -u
phases=${*:-build aot tests bench sweep loop}
out=${OUT:-$PWD/gpu_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
prefix=${GPU_BUNDLE:-$PWD/../../.gpu_bundle}/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
site=/tmp/wt18_site
old_site() {  # the build with ./old_optim's Python files instead of this branch's
  rm -rf /tmp/wt18_site_old && cp -r $site /tmp/wt18_site_old && cp old_optim/*.py /tmp/wt18_site_old/luminamoon/optim/
  echo /tmp/wt18_site_old
}
for phase in $phases; do
  t0=$(date +%s)
  case $phase in
    build)
      { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
        python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } \
        > "$out/build.log" 2>&1
      if [ -e $site/luminamoon/_native*.so ] 2>/dev/null || ls $site/luminamoon/_native*.so >/dev/null 2>&1; then
        echo "build: reusing $site" | tee -a "$out/build.log"
      else
        rm -rf $site /tmp/wt18_build
        timeout 420 python3 -m pip install -q --no-build-isolation --no-deps --target $site \
          -Cbuild-dir=/tmp/wt18_build -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
          -Ccmake.define.LUMINA_WITH_VULKAN=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF \
          "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
          -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
          -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
          -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" . >> "$out/build.log" 2>&1
        echo "build rc=$?" | tee -a "$out/build.log"
      fi ;;
    aot)
      LUMINAV_TRITON_AOT_DIR=$PWD/aot LUMINAV_TRITON_AOT_BENCH_N=268435456 timeout 120 ./aot/triton_aot_test \
        2>&1 | tee "$out/aot.log" | grep -E "OK|FAIL|SKIP|triton-aot|PASSED|error" | head -30 ;;
    tests)
      PYTHONPATH=$site timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py \
        ${TESTS_K:+-k "$TESTS_K"} -rs 2>&1 | tee "$out/pytest.log" | tail -15 ;;
    aottests)  # the triton-aot backend (luminav_step) with the CPU-built kernels, and the JIT's tests
      LUMINAV_TRITON_AOT_DIR=$PWD/aot PYTHONPATH=$site timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts= \
        tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_triton.py ${AOTTESTS_K:+-k "$AOTTESTS_K"} -rs 2>&1 \
        | tee "$out/pytest.log" | tail -15 ;;
    bench)
      PYTHONPATH=$site timeout 200 python3 bench/triton_step_bench.py --reps 7 --out "$out/bench.json" 2>&1 | tee "$out/bench.log" | tail -20 ;;
    aotbench)  # the JIT at its tuned default, the AOT kernels through luminav_step, side by side (one run)
      LUMINAV_TRITON_AOT_DIR=$PWD/aot PYTHONPATH=$site timeout 200 python3 bench/triton_step_bench.py --reps 7 \
        --skip-compile --kinds luminav_nvcc luminav_triton torch_fused_adamw luminav_step_nvcc luminav_step_triton_aot \
        --out "$out/bench.json" 2>&1 | tee "$out/bench.log" | tail -20 ;;
    sweep)  # the apply kernel's block and warps (LUMINAV_TRITON_APPLY_BLOCK / _NUM_WARPS), CLM fp32 2^28
      for cfg in 1024:4 2048:4 4096:8 4096:16 8192:16; do
        LUMINAV_TRITON_APPLY_BLOCK=${cfg%:*} LUMINAV_TRITON_NUM_WARPS=${cfg#*:} PYTHONPATH=$site timeout 60 \
          python3 bench/triton_step_bench.py --cases clm_f32 --kinds luminav_triton --skip-compile --reps 7 2>&1 \
          | sed "s/^/block=${cfg%:*} warps=${cfg#*:} /" | tee -a "$out/sweep.log" | tail -1
      done ;;
    loop)
      PYTHONPATH=$site timeout 240 python3 bench/optim_training_loop.py --kinds torch_fused luminav luminav_triton \
        --reps 5 --steps 3 --json "$out/loop.json" 2>&1 | tee "$out/loop.log" | tail -12 ;;
    loopreplay)  # the JIT step launched through the JIT on every step (LUMINAV_TRITON_REPLAY=0), for the A/B
      LUMINAV_TRITON_REPLAY=0 PYTHONPATH=$site timeout 120 python3 bench/optim_training_loop.py \
        --kinds luminav_triton --reps 5 --steps 3 --json "$out/loop_noreplay.json" 2>&1 | tee "$out/loop_noreplay.log" | tail -8 ;;
    hostprofile)  # the Llama loop's Triton step: address changes per step, replays, cProfile of opt.step()
      PYTHONPATH=$site timeout 120 python3 bench/triton_loop_host_profile.py --steps 5 --out "$out" 2>&1 \
        | tee "$out/host_profile.log" | head -40 ;;
    loopold)  # the Triton step with ./old_optim's Python (same build, a second process): the A/B
      PYTHONPATH=$(old_site) timeout 120 python3 bench/optim_training_loop.py \
        --kinds luminav_triton --reps 5 --steps 3 --json "$out/loop_old.json" 2>&1 | tee "$out/loop_old.log" | tail -8 ;;
    hostprofileold)
      PYTHONPATH=$(old_site) timeout 120 python3 bench/triton_loop_host_profile.py --steps 5 --out "$out" --tag _old 2>&1 \
        | tee "$out/host_profile_old.log" | head -40 ;;
    tdtests)
      LUMINAV_TRITON_AOT_DIR=$PWD/aot PYTHONPATH=$site timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= \
        tests/optim/test_gpu_triton_aot.py -rs 2>&1 | tee "$out/pytest_aot.log" | tail -25 ;;
    tdbench)
      LUMINAV_TRITON_AOT_DIR=$PWD/aot PYTHONPATH=$site timeout 200 python3 bench/triton_step_bench.py --reps 7 \
        --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 tdclm_tensor_f32 \
        --kinds luminav_nvcc luminav_triton luminav_step_nvcc luminav_step_triton_aot --out "$out/tdbench.json" 2>&1 \
        | tee "$out/tdbench.log" | tail -20 ;;
    s6tests)
      LUMINAV_TRITON_AOT_DIR=$PWD/aot PYTHONPATH=$site timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts= \
        tests/optim/test_gpu_triton_aot.py tests/optim/test_gpu_triton.py -rs 2>&1 | tee "$out/pytest.log" | tail -25 ;;
    s6bench)
      for run in 1 2; do
        LUMINAV_TRITON_AOT_DIR=$PWD/aot PYTHONPATH=$site timeout 150 python3 bench/triton_step_bench.py --reps 30 \
          --skip-compile --replay --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 tdclm_tensor_f32 \
          --kinds luminav_nvcc luminav_triton luminav_step_triton_aot luminav_step_nvcc --out "$out/tdbench$run.json" 2>&1 \
          | sed "s/^/run$run /" | tee -a "$out/tdbench.log"
      done ;;
    s6sweep)
      for cfg in 128:8 64:8 128:4 32:4; do
        LUMINAV_TRITON_FACTOR_LOAD_ROWS=${cfg%:*} LUMINAV_TRITON_FACTOR_WARPS=${cfg#*:} PYTHONPATH=$site timeout 60 \
          python3 bench/triton_step_bench.py --cases tdclm_factored_f32 --kinds luminav_triton --skip-compile --reps 30 \
          --replay 2>&1 | sed "s/^/load_rows=${cfg%:*} warps=${cfg#*:} /" | tee -a "$out/sweep.log" | tail -2
      done ;;
    loopab)  # the JIT step one launch per tensor again (LUMINAV_TRITON_MULTI_TENSOR=0), for the A/B
      LUMINAV_TRITON_MULTI_TENSOR=0 PYTHONPATH=$site timeout 120 python3 bench/optim_training_loop.py \
        --kinds luminav_triton --reps 5 --steps 3 --json "$out/loop_single.json" 2>&1 | tee "$out/loop_single.log" | tail -8 ;;
  esac
  echo "phase $phase: $(( $(date +%s) - t0 )) s" | tee -a "$out/build.log"
done
