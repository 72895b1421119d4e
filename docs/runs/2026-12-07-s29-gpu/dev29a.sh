#!/bin/bash
# Session 29, call 1: issue 18's factored pass 2 in segments (branch triton-factored-segments, its kernels file
# carried as build/new_optim/triton_kernels.py) against main's kernels on an H200: the package built once from main;
# a copy of the site with the branch's kernels; the AOT sets of both built on the CPU machine (build/aot_s29_new,
# build/aot_s29_old, sm_90). First the kernel benchmark (2^28, two rounds, order alternated), then the user's loop
# (Llama 98M, TD-CLM factored on the Triton JIT beside torch fused and TD-CLM on nvcc, one process per site), then
# the Triton GPU tests on the branch's kernels. Stops at once on any card but an H200 (ALLOW_H100=1 overrides).
set -u
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ -z "${ALLOW_H100:-}" ] && ! grep -q "H200" "$OUT/gpu.txt"; then echo "not an H200: stopping"; exit 0; fi
t0=$(date +%s)
bash bench/gpu_suite.sh build 2>&1 | tail -3
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf /tmp/lm_site_new && cp -r /tmp/lm_site /tmp/lm_site_new && cp build/new_optim/triton_kernels.py /tmp/lm_site_new/luminamoon/optim/
site_of() { [ "$1" = new ] && echo /tmp/lm_site_new || echo /tmp/lm_site; }
bench() {  # $1 new|old, $2 round
  LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_$1 PYTHONPATH=$(site_of $1) timeout 90 python3 bench/triton_step_bench.py \
    --reps 30 --replay --skip-compile --cases tdclm_factored_f32 tdclm_factored_bf16_master tdclm_row_f32 \
    --kinds luminav_triton luminav_step_triton_aot --out "$OUT/bench_$1_$2.json" 2>&1 | sed "s/^/$1 r$2 /" \
    | tee -a "$OUT/bench.log" | grep -E "copy|Error"
}
loop() {  # $1 new|old
  PYTHONPATH=$(site_of $1) timeout 150 python3 bench/optim_training_loop.py --kinds torch_fused luminav_tdclm_triton \
    luminav_tdclm --rounds 3 --reps 20 --json "$OUT/loop_$1.json" 2>&1 | sed "s/^/$1 /" | tee "$OUT/loop_$1.log" \
    | grep -E "^$1 (torch_fused|luminav)|Error"
}
bench old 1; bench new 1; bench new 2; bench old 2
echo "bench done at $(( $(date +%s) - t0 )) s"
loop old; loop new
echo "loop done at $(( $(date +%s) - t0 )) s"
lib=$(find /tmp/lm_site -name 'libluminav.so*' | head -1)
LUMINAV_TRITON_AOT_DIR=$PWD/build/aot_s29_new PYTHONPATH=/tmp/lm_site_new LUMINAV_LIBRARY=$lib timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -o addopts= tests/optim/test_gpu_triton.py tests/optim/test_gpu_triton_aot.py -rs 2>&1 \
  | tee "$OUT/pytest.log" | tail -6
echo "all done at $(( $(date +%s) - t0 )) s"
