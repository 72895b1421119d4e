#!/usr/bin/env bash
# Builds luminamoon for the free-threaded CPython of build_free_threaded_python.sh
# into its own virtual environment (nanobind FREE_THREADED: the extensions
# declare Py_MOD_GIL_NOT_USED, Note [free-threaded bindings] in src/python/module.cc):
#   scripts/build_free_threaded_package.sh     -> $FT_VENV/bin/python imports luminamoon, GIL off
# By default in its own CMake folder with the CUDA kernels off (the
# free-threaded tests and benchmark run on the CPU). `make test` passes its
# BUILD_DIR and settings instead: only the Python-dependent targets (nanobind,
# the extensions) are rebuilt for this interpreter, libluminav and the data
# engine are reused (and rebuilt for the normal Python's extension by the next
# `make build`, likewise only those targets).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${LUMINA_CACHE:-/var/cache/luminamoon}
FT_PREFIX=${LUMINA_FT_PREFIX:-$CACHE/python3.13t}
FT_PYTHON=$FT_PREFIX/bin/python3.13t
VENV=${VENV:-.venv}  # the normal venv: its cmake and ninja build this one too
FT_VENV=${FT_VENV:-build/free-threaded/venv}
FT_BUILD_DIR=${FT_BUILD_DIR:-build/free-threaded/cmake}
FT_BUILD_TESTS=${FT_BUILD_TESTS:-OFF}
FT_CUDA_KERNELS=${FT_CUDA_KERNELS:-OFF}
JOBS=${JOBS:-2}

if [ ! -x "$FT_PYTHON" ]; then
  echo "[free-threaded] no interpreter at $FT_PYTHON: run scripts/build_free_threaded_python.sh" >&2
  exit 2
fi
if [ ! -x "$FT_VENV/bin/python" ]; then
  "$FT_PYTHON" -m venv "$FT_VENV"
fi
stamp=$FT_VENV/.requirements.stamp
if [ ! -f "$stamp" ] || ! cmp -s requirements-free-threaded.txt "$stamp"; then
  echo "[free-threaded] pip install -r requirements-free-threaded.txt"
  "$FT_VENV/bin/pip" install -q -r requirements-free-threaded.txt
  cp requirements-free-threaded.txt "$stamp"
fi
echo "[free-threaded] building luminamoon for $("$FT_VENV/bin/python" -VV | head -1)"
PATH="$(realpath "$VENV")/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS nice -n 10 \
  "$FT_VENV/bin/python" -m pip install --no-build-isolation --no-deps -q \
  -Cbuild-dir="$FT_BUILD_DIR" -Ccmake.define.LUMINA_BUILD_TESTS="$FT_BUILD_TESTS" \
  -Ccmake.define.LUMINA_CUDA_KERNELS="$FT_CUDA_KERNELS" .
"$FT_VENV/bin/python" -c '
import sys, luminamoon._native, luminamoon.data, luminamoon.optim
assert not sys._is_gil_enabled(), "importing luminamoon enabled the GIL"
print("[free-threaded] ok: GIL disabled after importing luminamoon")'
