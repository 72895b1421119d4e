#!/usr/bin/env bash
# Incremental developer build into .venv (sm_90 cubins only: fast). Not used by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2} .venv/bin/python -m pip install --no-build-isolation --no-deps -q \
  -Cbuild-dir=build/dev -Ccmake.define.LUMINA_BUILD_TESTS=ON "-Ccmake.define.LUMINA_CUDA_ARCHS=90" . 2>&1 \
  | grep -v "^WARNING: Location" || true
