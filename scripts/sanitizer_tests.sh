#!/usr/bin/env bash
# The sanitizer and fuzzing jobs of `make test` (issue 16), data engine only
# (no optimizer, no CUDA, no Python), Highway kernels for one target:
#   asan: ASan+UBSan build of the C++ data tests and the fuzz targets; runs
#         the tests, replays every fuzz corpus, fuzzes each target FUZZ_SECONDS;
#   tsan: ThreadSanitizer build of the pipeline, dedup and MinHash tests.
# Needs clang (scripts/install_deps.sh installs it); without it each job says
# so and passes, so that a machine without clang still runs `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:?usage: sanitizer_tests.sh asan|tsan}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
CC_BIN=${CLANG_CC:-$(command -v clang || true)}
CXX_BIN=${CLANG_CXX:-$(command -v clang++ || true)}
if [ -z "$CXX_BIN" ] || [ -z "$CC_BIN" ]; then
  echo "[sanitizer_tests] clang not found: the $job job is skipped (install clang libclang-rt-dev)"
  exit 0
fi

configure() {  # dir sanitizer extra-args...
  local dir=$1 san=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1" \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
    -DLUMINA_SANITIZE="$san" -DLUMINA_WITH_OPTIM=OFF -DLUMINA_BUILD_PYTHON=OFF \
    -DLUMINA_BUILD_TESTS=ON -DLUMINA_HWY_STATIC_ONLY=ON "$@" >/dev/null
}

start=$(date +%s)
case "$job" in
  asan)
    dir=${SAN_BUILD_DIR:-build/sanitize}
    # The venv's pyarrow provides Arrow C++ for fuzz_parquet_reader.
    venv=${VENV:-.venv}
    [[ "$venv" = /* ]] || venv=$PWD/$venv  # absolute, but not resolved: a venv's python is a symlink
    fuzz_python=$venv/bin/python
    [ -x "$fuzz_python" ] || fuzz_python=""
    configure "$dir" address,undefined -DLUMINA_BUILD_FUZZERS=ON -DLUMINA_FUZZ_SECONDS="$FUZZ_SECONDS" \
      -DLUMINA_FUZZ_PYTHON="$fuzz_python"
    cmake --build "$dir" -j "$JOBS"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -LE fuzz
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L fuzz -R fuzz_replay_
    # One fuzzer per core at a time, each for FUZZ_SECONDS.
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L fuzz -R fuzz_run_
    ;;
  tsan)
    dir=${TSAN_BUILD_DIR:-build/tsan}
    configure "$dir" thread
    cmake --build "$dir" -j "$JOBS" --target fused_pipeline_test dedup_test minhash_test
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp}
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" \
      -R 'FusedPipeline|StreamDeduplicator|AppendLog|HashKeySet|MinHash'
    ;;
  *) echo "unknown job $job" >&2; exit 2 ;;
esac
echo "[sanitizer_tests] $job: $(( $(date +%s) - start )) s"
