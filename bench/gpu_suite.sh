#!/usr/bin/env bash
# The optimizer's GPU run in one device call: build the package on the GPU
# machine (its Python differs), the GPU test suites, then the training-loop
# benchmark. From the repository root, with the Debian simdjson/OpenSSL files
# the GPU image lacks unpacked under .gpu_bundle/prefix (git-ignored; without it the CUDA backend is left
# out of the build; on this Debian machine: `apt-get download libsimdjson-dev libsimdjson14 libssl-dev
# libssl3`, `dpkg -x` each into one folder, its usr/ copied to .gpu_bundle/prefix, carried to the device):
#   [GPU_TESTS="files"] [LOOP_ARGS="..."] bench/gpu_suite.sh [build | build_async] [tests] [profile] [loop] [quality] [kernels] [headline] [sharded] [fsdp2] [evidence] [triton_tune]
# Logs and JSON go to $OUT (or ./gpu_out).
set -u
phases=${*:-build tests loop}
out=${OUT:-$PWD/gpu_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# LM_SITE / LM_SRC: another site and source tree for the build (an A/B builds main and a change side by side)
site=${LM_SITE:-/tmp/lm_site}
src=${LM_SRC:-$PWD}
build_dir=${LM_SITE:+$site.build}; build_dir=${build_dir:-/tmp/lm_build}
build_package() {  # the package from $src into $site (log: $out/build.log); returns pip's status
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/env.txt"
  rm -rf $site $build_dir  # a warm machine keeps them; build from the tree
  local t0=$(date +%s) rc
  timeout 500 python3 -m pip install -q --no-build-isolation --no-deps --target $site \
    -Cbuild-dir=$build_dir -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_WITH_SIMD=OFF \
    -Ccmake.define.LUMINA_WITH_VULKAN=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
    -Ccmake.define.CMAKE_PREFIX_PATH="$prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
    -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
    -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" "$src" > "$out/build.log" 2>&1
  rc=$?
  echo "build rc=$rc in $(( $(date +%s) - t0 )) s"; grep -E "LuminaMoon:|rror" "$out/build.log" | head -20
  if [ $rc -eq 0 ] && ! PYTHONPATH=$site python3 -c "from luminamoon import optim
import sys; sys.exit(not any(n == 'cuda' and ok for n, ok, _ in optim.backends()))"; then
    echo "build: the CUDA backend is missing from this build (is .gpu_bundle/prefix here?)"; rc=3
  fi
  return $rc
}
# EVIDENCE_WHEELS: a folder of wheels the image lacks (adam-mini, torchao), for the evidence and loop phases
if [ -n "${EVIDENCE_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/lm_wheels "$EVIDENCE_WHEELS"/*.whl
fi
for phase in $phases; do
  case $phase in
    build) build_package ;;
    build_async)  # the build in the background; the evidence phase's --luminav-after waits for its status file
      rm -f /tmp/lm_site.rc
      ( build_package; echo $? > /tmp/lm_site.rc.tmp; mv /tmp/lm_site.rc.tmp /tmp/lm_site.rc ) & ;;
    tests)
      lib=$(find $site -name 'libluminav.so*' | head -1)
      NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      PYTHONPATH=$site LUMINAV_LIBRARY=$lib timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts= \
        ${GPU_TESTS:-tests/optim/test_gpu_async_step.py tests/optim/test_gpu_step_graph.py tests/optim/test_optim_cuda_frontend.py tests/optim/test_gpu_torch.py \
        tests/optim/test_gpu_cuda.py tests/optim/test_gpu_triton.py tests/optim/test_gpu_sharded.py} \
        -rs 2>&1 | tee "$out/pytest.log" | tail -25 ;;
    sharded)  # the sharded (DTensor) step's GPU tests, a one-rank NCCL group, and the async step's
      lib=$(find $site -name 'libluminav.so*' | head -1)
      NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      PYTHONPATH=$site LUMINAV_LIBRARY=$lib timeout ${SHARDED_TIMEOUT:-120} python3 -m pytest -q -p no:cacheprovider \
        -o addopts= tests/optim/test_gpu_sharded.py tests/optim/test_gpu_async_step.py -rs 2>&1 \
        | tee "$out/pytest_sharded.log" | tail -25 ;;
    fsdp2)  # FSDP2 + NCCL under torchrun on every GPU of the machine (bench/optim_fsdp2.py)
      gpus=$(nvidia-smi -L | wc -l)
      NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      PYTHONPATH=$site timeout ${FSDP2_TIMEOUT:-200} python3 -m torch.distributed.run --standalone \
        --nproc-per-node "$gpus" bench/optim_fsdp2.py --json "$out/fsdp2_world$gpus.json" ${FSDP2_ARGS:-} 2>&1 \
        | tee "$out/fsdp2.log" | grep -v "^W" | tail -20 ;;
    profile)
      PYTHONPATH=$site:bench LUMINAV_TRACE_HOST=1 timeout 200 python3 bench/optim_host_profile.py 2>&1 | tee "$out/profile.log" | grep -v "luminav: step_async" | tail -40
      grep "luminav: step_async" "$out/profile.log" | tail -12 ;;
    loop)
      PYTHONPATH=$site:/tmp/lm_wheels timeout ${LOOP_TIMEOUT:-400} python3 bench/optim_training_loop.py --json "$out/loop.json" ${LOOP_ARGS:-} 2>&1 | tee "$out/loop.log" | tail -20 ;;
    quality)
      PYTHONPATH=$site:bench timeout 420 python3 bench/optim_llama_quality.py --steps ${QUALITY_STEPS:-400} ${QUALITY_ARGS:-} --json "$out/quality.json" 2>&1 | tee "$out/quality.log" | tail -12 ;;
    evidence)  # issue 14: every (regime, optimizer, seed) as its own process at once (bench/optim_llama_evidence.py);
      PYTHONPATH=$site:bench:/tmp/lm_wheels timeout ${EVIDENCE_TIMEOUT:-560} python3 bench/optim_llama_evidence.py \
        --work /tmp/lm_evidence --out "$out" --deadline-s ${EVIDENCE_DEADLINE:-520} ${EVIDENCE_ARGS:-} 2>&1 \
        | tee "$out/evidence.log" | tail -60
      tar -czf "$out/evidence_runs.tar.gz" -C /tmp/lm_evidence --exclude='*.json' . ;;  # the per-run logs, one file
    kernels)
      lib=$(find $site -name 'libluminav.so*' | head -1)
      PYTHONPATH=$site LUMINAV_LIBRARY=$lib timeout 200 python3 bench/cuda_step_bench.py --out "$out/kernels.json" 2>&1 | tee "$out/kernels.log" | tail -20 ;;
    triton_tune)  # issue 18: the Triton JIT's apply/reduce geometry (block x warps), replays at 2^28; the default first and last
      for cfg in ${TUNE_CONFIGS:-1024:4 2048:4 2048:8 4096:8 1024:8 512:4 1024:4}; do
        LUMINAV_TRITON_APPLY_BLOCK=${cfg%:*} LUMINAV_TRITON_NUM_WARPS=${cfg#*:} PYTHONPATH=$site timeout 150 python3 \
          bench/triton_step_bench.py --cases ${TUNE_CASES:-tdclm_factored_f32 clm_f32 tdclm_factored_bf16_master} \
          --kinds luminav_triton --skip-compile --reps 30 --replay 2>&1 | sed "s/^/block=${cfg%:*} warps=${cfg#*:} /" \
          | tee -a "$out/triton_tune.log" | grep -v "^$" | tail -8
      done ;;
    headline)  # the GPU rows of make bench's table (bench/run_all.py --gpu)
      PYTHONPATH=$site:bench timeout 300 python3 bench/run_all.py --gpu --json "$out/headline.json" 2>&1 | tee "$out/headline.log" | tail -12 ;;
  esac
done
