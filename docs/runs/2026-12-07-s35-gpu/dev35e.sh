#!/bin/bash
# Session 35 (issues 13, 18): the triton-aot device pointer cache (this tree) against main before it (its tree as
# build/base_src: `git archive a66a152~1 CMakeLists.txt cmake include src python pyproject.toml README.md
# bench/gpu_suite.sh`), both on AOT set build/aot_s35m: the Llama 98M loop, TD-CLM on triton-aot, the JIT and nvcc,
# one round per process, base / new alternating twice. With H200_EXTRA=1 on an H200 also, with the new build: issue 18's kernel
# benchmark (every case at 2^28) and the loop with torch's fused AdamW, three rounds.
# Carry .gpu_bundle, build/aot_s35m, build/base_src.
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s35m
ln -sfn "$PWD/.gpu_bundle" build/base_src/.gpu_bundle
(cd build/base_src && OUT=/tmp/build_base bash bench/gpu_suite.sh build 2>&1 | tail -1)
rm -rf /tmp/lm_site_base && cp -r /tmp/lm_site /tmp/lm_site_base
OUT=/tmp/build_new bash bench/gpu_suite.sh build 2>&1 | tail -1
for run in ${RUNS:-base new base new}; do  # RUNS and KINDS: a shorter A/B where device time is short
  site=/tmp/lm_site; [ $run = base ] && site=/tmp/lm_site_base
  PYTHONPATH=$site timeout 100 python3 bench/optim_training_loop.py --kinds ${KINDS:-luminav_tdclm_triton_aot \
    luminav_tdclm_triton luminav_tdclm} --rounds 1 --reps 20 --json "$OUT/loop_$run.json" 2>&1 \
    | sed "s/^/$run /" | tee -a "$OUT/loop_ab.log" | grep -E "^$run (luminav)|Error"
done
echo "A/B done at $(( $(date +%s) - t0 )) s"
[ "${H200_EXTRA:-0}" = 1 ] && grep -q H200 "$OUT/gpu.txt" || { echo "the rest left out (H200_EXTRA=1 on an H200 runs it)"; exit 0; }
PYTHONPATH=/tmp/lm_site timeout 120 python3 bench/triton_step_bench.py --reps 30 --replay \
  --kinds luminav_nvcc luminav_triton luminav_triton_aot torch_fused_adamw --out "$OUT/kernel_bench.json" 2>&1 \
  | tee "$OUT/kernel_bench.log" | grep -E "copy|first step|Error|captured"
PYTHONPATH=/tmp/lm_site timeout $(( 430 - $(date +%s) + t0 )) python3 bench/optim_training_loop.py --kinds \
  torch_fused luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot --rounds 3 --reps 20 \
  --json "$OUT/loop.json" 2>&1 | tee "$OUT/loop.log" | grep -E "^(torch_fused|luminav)|Error|floor"
echo "all done at $(( $(date +%s) - t0 )) s"
