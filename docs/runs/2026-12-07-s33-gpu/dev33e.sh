#!/bin/bash
# Session 33, call 5: docs/runs/2026-12-07-s33-gpu/finalize_dump.py on main (2b370a1). Carry .gpu_bundle.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name --format=csv,noheader
bash bench/gpu_suite.sh build 2>&1 | tail -1
LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu PYTHONPATH=/tmp/lm_site timeout 200 \
  python3 docs/runs/2026-12-07-s33-gpu/finalize_dump.py 2>&1 | grep -v -i warn
