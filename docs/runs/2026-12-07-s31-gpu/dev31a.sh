#!/bin/bash
# Session 31, call 1 (any card): triton-aot's asynchronous step with the multi-tensor kernels (Note [triton-aot
# batches]): the package built, the AOT set of this tree (build/aot_s31, carried: build_triton_aot.py --targets
# sm_90), the AOT and asynchronous-step GPU tests (session 30's mended tests among them), the kernels of one
# Llama 98M step under the profiler, then the user's loop (Llama 98M, TD-CLM) against torch's fused AdamW, the nvcc
# kernels and the Triton JIT. On an H200 also the factored pass 2 in segments (session 30's call 3, the JIT only).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s31 PYTHONPATH=/tmp/lm_site
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_LIBRARY=$lib timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py \
  tests/optim/test_gpu_async_step.py -rs 2>&1 | tee "$OUT/pytest_aot.log" | tail -15
echo "tests done at $(( $(date +%s) - t0 )) s"
timeout 100 python3 docs/runs/2026-12-07-s30-gpu/profile_aot_step.py 2>&1 | tee "$OUT/profile.log" | tail -30
echo "profile done at $(( $(date +%s) - t0 )) s"
timeout 170 python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm luminav_tdclm_triton \
  luminav_tdclm_triton_aot --rounds 2 --reps 20 --json "$OUT/loop.json" 2>&1 | tee "$OUT/loop.log" \
  | grep -E "^(torch_fused|luminav)|Error|floor"
echo "loop done at $(( $(date +%s) - t0 )) s"
if grep -q H200 "$OUT/gpu.txt"; then
  # Issue 18's factored pass 2 in segments (branch triton-factored-segments: its kernels file carried as
  # build/new_optim/triton_kernels.py) against main's, the Triton JIT at 2^28, two rounds in the order old, new, new, old.
  rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new && cp build/new_optim/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
  for run in old:1 new:1 new:2 old:2; do
    which=${run%%:*}; site=/tmp/lm_site; [ $which = new ] && site=/tmp/lm_site_new
    PYTHONPATH=$site timeout 100 python3 bench/triton_step_bench.py --reps 30 --replay --skip-compile \
      --cases tdclm_factored_f32 tdclm_factored_bf16_master --kinds luminav_triton --out "$OUT/bench_${run/:/_}.json" 2>&1 \
      | sed "s/^/$run /" | tee -a "$OUT/bench.log" | grep -E "copy|Error|captured"
  done
fi
echo "all done at $(( $(date +%s) - t0 )) s"
