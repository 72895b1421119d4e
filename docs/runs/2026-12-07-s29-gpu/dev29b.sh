#!/bin/bash
# Session 29, call 2 (any card): the triton-aot backend's asynchronous step (Note [triton-aot async step]):
# its GPU tests, then the kernel benchmark (2^28) with LuminaV(backend="triton-aot") beside the JIT and the synchronous
# luminav_step, and the user's loop (Llama 98M, TD-CLM). On an H200 also issue 18's factored pass 2 in segments
# (branch triton-factored-segments: its kernels file carried as build/new_optim/triton_kernels.py, its AOT set as
# build/aot_s29_new) against main's (build/aot_s29_old) in the kernel benchmark, one process each (the device time left allows no more);
# the loop of the branch's kernels and their JIT tests are call 3 (dev29c.sh).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
h200=0; grep -q H200 "$OUT/gpu.txt" && h200=1
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new && cp build/new_optim/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
site_of() { [ "$1" = new ] && echo /tmp/lm_site_new || echo /tmp/lm_site; }
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_old PYTHONPATH=/tmp/lm_site LUMINAV_LIBRARY=$lib timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton_aot.py -rs 2>&1 \
  | tee "$OUT/pytest_aot.log" | tail -8
echo "aot tests done at $(( $(date +%s) - t0 )) s"
bench() {  # $1 new|old, $2 round
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_$1 PYTHONPATH=$(site_of $1) timeout 100 python3 bench/triton_step_bench.py \
    --reps 30 --replay --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master \
    --kinds luminav_triton luminav_triton_aot luminav_step_triton_aot --out "$OUT/bench_$1_$2.json" 2>&1 \
    | sed "s/^/$1 r$2 /" | tee -a "$OUT/bench.log" | grep -E "copy|Error|captured"
}
loop() {  # $1 new|old, $2 kinds
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_$1 PYTHONPATH=$(site_of $1) timeout 170 python3 bench/optim_training_loop.py \
    --kinds $2 --rounds 2 --reps 20 --json "$OUT/loop_$1.json" 2>&1 | sed "s/^/$1 /" | tee "$OUT/loop_$1.log" \
    | grep -E "^$1 (torch_fused|luminav)|Error|floor"
}
bench old 1
[ $h200 = 1 ] && bench new 1
echo "bench done at $(( $(date +%s) - t0 )) s"
loop old "torch_fused luminav_tdclm luminav_tdclm_triton luminav_tdclm_triton_aot"
echo "loop old done at $(( $(date +%s) - t0 )) s"
echo "all done at $(( $(date +%s) - t0 )) s"
