#!/usr/bin/env bash
# Issue 19's GPU run in one device call: build with the Vulkan, simd and CUDA
# backends, the Vulkan suite on the NVIDIA ICD (validation layer included),
# then the benchmark (Vulkan device-local and imported host buffers against a
# Vulkan buffer copy, simd, and the CUDA backend side by side). From the root
# of a copy of the branch, with the bundle of this machine's Vulkan loader,
# glslc, headers, validation layer, libglvnd (the NVIDIA ICD's
# libGLX_nvidia needs libGLdispatch), Highway and oneTBB (built by the lead's recipe in
# docs/benchmarks.md "Issue 19") at $VK_BUNDLE and the lead's .gpu_bundle:
#   VK_BUNDLE=../wt19_gl GPU_BUNDLE=../../.gpu_bundle bash bench/vulkan_gpu_run.sh
# The first lines probe the ICD's needs (env.txt) and stop the call early when no
# Vulkan device comes up. WITH_SIMD=ON adds the simd backend: its Highway kernels did not build within
# 260 s there (docs/runs/issue19_h200_call2_build.log); off, the build took 25-34 s. LOG2N,
# BENCH_FLAGS (e.g. "--no-host --no-simd") and CUDA_LOG2N trim the benchmark; the whole run took
# 98 s (call 3) and, trimmed, 60 s (call 4). BASE_TREE (below) adds an A/B benchmark.
# Writes at most 8 files to $OUT (the device tool brings back no more).
# SIMD_BENCH_DIR (below) runs a carried benchmark; BENCH_TIMEOUT (default 90 s) bounds it. TESTS replaces the pytest files (default tests/optim/test_vulkan_backend.py).
set -u
out=${OUT:-$PWD/gpu_out}
mkdir -p "$out"
vkb=$(cd "${VK_BUNDLE:-../wt19_gl}" && pwd)
prefix=$(cd "${GPU_BUNDLE:-../../.gpu_bundle}/prefix" && pwd)
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$vkb/lib:$vkb/prefix/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
icd=$(ls /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
      /etc/vulkan/icd.d/nvidia_icd.json 2>/dev/null | head -1)
export VK_DRIVER_FILES=$icd VK_ADD_LAYER_PATH=$vkb/layers
# The ICD (libGLX_nvidia) needs libglvnd's libGLdispatch: where the image lacks
# it, the bundle's libglvnd (Debian's, as the device notes' recipe unpacks it)
# goes where ldconfig finds it; the loader itself is dlopened from the bundle.
if ! ldconfig -p | grep -q libGLdispatch.so.0; then
  cp -n "$vkb"/lib/libGL*.so.* "$vkb"/lib/libEGL.so.1 "$vkb"/lib/libOpenGL.so.0 /usr/lib/x86_64-linux-gnu/ && ldconfig
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "icd=$icd"; cat "$icd"
  echo "--- ldconfig"; ldconfig -p | grep -E "vulkan|GLdispatch|GLX|glvkspirv|gpucomp"
  echo "--- driver libraries"; ls /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu 2>/dev/null | grep -E "GLX_nvidia|glvkspirv|gpucomp|nvidia-glcore|nvidia-tls"
  glx=$(ldconfig -p | awk '/libGLX_nvidia.so.0/{print $NF; exit}'); echo "--- ldd $glx"; ldd "${glx:-/nonexistent}"
} > "$out/env.txt" 2>&1
site=/tmp/vk_site; build=/tmp/vk_build
rm -rf $site $build
t0=$(date +%s)
timeout 260 python3 -m pip install -q --no-build-isolation --no-deps --target $site \
  -Cbuild-dir=$build -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF -Ccmake.define.LUMINA_WITH_SIMD=${WITH_SIMD:-OFF} "-Ccmake.define.LUMINA_CUDA_ARCHS=90" \
  -Ccmake.define.hwy_DIR=$vkb/prefix/lib/x86_64-linux-gnu/cmake/hwy \
  -Ccmake.define.TBB_DIR=$vkb/prefix/lib/x86_64-linux-gnu/cmake/TBB \
  -Ccmake.define.LUMINA_VULKAN_INCLUDE_DIR=$vkb/include -Ccmake.define.LUMINA_GLSLC=$vkb/bin/glslc \
  "-Ccmake.define.CMAKE_PREFIX_PATH=$prefix;$vkb/prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
  -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
  -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" . > "$out/build.log" 2>&1
echo "build rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$out/build.log"
grep -E "LUMINA_HAVE|LUMINA_GLSLC|LUMINA_VULKAN" $build/CMakeCache.txt | tee -a "$out/build.log"
# SIMD_BENCH_DIR: the benchmark and its libluminav built on the CPU machine with the simd and
# Vulkan backends (CUDA off; the H200 machine builds the Highway kernels too slowly, see above),
# carried in, run instead of the one built here so that simd stands beside Vulkan on this host.
if [ -n "${SIMD_BENCH_DIR:-}" ]; then
  bench_bin=$(cd "$SIMD_BENCH_DIR" && pwd)/luminav_vulkan_bench; bench_libdir=$(dirname "$bench_bin")
else
  timeout 200 cmake --build $build --target luminav_vulkan_bench -j 16 >> "$out/build.log" 2>&1
  echo "bench build rc=$? at $(( $(date +%s) - t0 )) s"
  bench_bin=$build/src/optim/vulkan/luminav_vulkan_bench; bench_libdir=
fi
lib=$(find $site -name 'libluminav.so*' | head -1)
PYTHONPATH=$site:tests timeout 20 python3 -c "from luminamoon import info; info.main()" 2>&1 | tee "$out/info.txt" | sed -n '/Backends/,/Versions/p'
# No Vulkan device: the probe in env.txt says why; stop before spending device time on skips.
if ! grep -qE '^ *vulkan +available' "$out/info.txt"; then echo "vulkan unavailable: stopping"; exit 3; fi
PYTHONPATH=$site LUMINAV_LIBRARY=$lib timeout 100 python3 -m pytest -q -p no:cacheprovider -o addopts= \
  ${TESTS:-tests/optim/test_vulkan_backend.py} -rs 2>&1 | tee "$out/pytest.log" | tail -15
echo "tests done at $(( $(date +%s) - t0 )) s"
LD_LIBRARY_PATH=${bench_libdir:-$(dirname "$lib")}:$LD_LIBRARY_PATH timeout ${BENCH_TIMEOUT:-90} $bench_bin \
  --log2n ${LOG2N:-24,26,28} --reps 5 ${BENCH_FLAGS:-} 2>&1 | tee "$out/vulkan_bench.jsonl"
echo "vulkan bench done at $(( $(date +%s) - t0 )) s"
# BASE_TREE: another copy of the sources (e.g. the branch before a change), its benchmark
# built the same way and run right after this one's, for an A/B in one call.
if [ -n "${BASE_TREE:-}" ]; then
  timeout 200 python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/vk_site_base \
    -Cbuild-dir=/tmp/vk_build_base -Ccmake.define.LUMINA_WITH_DATA=OFF -Ccmake.define.LUMINA_TRITON_AOT=OFF \
    -Ccmake.define.LUMINA_WITH_SIMD=OFF -Ccmake.define.LUMINA_WITH_CUDA=OFF \
    -Ccmake.define.LUMINA_VULKAN_INCLUDE_DIR=$vkb/include -Ccmake.define.LUMINA_GLSLC=$vkb/bin/glslc \
    "-Ccmake.define.CMAKE_PREFIX_PATH=$prefix;$vkb/prefix" -Ccmake.define.OPENSSL_ROOT_DIR="$prefix" \
    -Ccmake.define.OPENSSL_INCLUDE_DIR="$prefix/include" \
    -Ccmake.define.OPENSSL_CRYPTO_LIBRARY="$prefix/lib/x86_64-linux-gnu/libcrypto.so" "$BASE_TREE" >> "$out/build.log" 2>&1
  cmake --build /tmp/vk_build_base --target luminav_vulkan_bench -j 16 >> "$out/build.log" 2>&1
  echo "base build rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$out/build.log"
  base_lib=$(find /tmp/vk_site_base -name 'libluminav.so*' | head -1)
  LD_LIBRARY_PATH=$(dirname "$base_lib"):$LD_LIBRARY_PATH timeout 90 /tmp/vk_build_base/src/optim/vulkan/luminav_vulkan_bench \
    --log2n ${LOG2N:-24,26,28} --reps 5 ${BENCH_FLAGS:-} 2>&1 | tee "$out/base_vulkan_bench.jsonl"
  echo "base bench done at $(( $(date +%s) - t0 )) s"
fi
# One file for every size (the device tool brings back at most 8): each size's JSON follows a
# "# 2^N" line.
for lg in ${CUDA_LOG2N:-28 24}; do
  PYTHONPATH=$site:tests/optim:tests LUMINAV_LIBRARY=$lib timeout 45 python3 bench/cuda_step_bench.py --log2n $lg --reps 20 --only torch,clm,tdclm \
    --out "/tmp/cuda_bench_2e$lg.json" 2>&1 | tail -12
  { echo "# 2^$lg"; cat "/tmp/cuda_bench_2e$lg.json"; echo; } >> "$out/cuda_bench.json"
done | tee "$out/cuda_bench.log"
echo "all done at $(( $(date +%s) - t0 )) s"
