set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
which perf gdb py-spy ltrace strace 2>&1 | tee $OUT/tools.txt
P="timeout 60 python3 dev20_host2.py luminav 300"
export PYTHONPATH=/tmp/site:bench
$P 2>&1 | grep native | tee $OUT/knobs.txt
LUMINAV_CUDA_STEP_AGAIN=0 $P 2>&1 | grep native | tee -a $OUT/knobs.txt
LUMINAV_CUDA_GRAPHS=0 $P 2>&1 | grep native | tee -a $OUT/knobs.txt
if command -v perf >/dev/null; then
  perf record -F 2999 -g -o /tmp/h.data -- python3 dev20_host2.py luminav 3000 > /dev/null 2>&1
  perf report -i /tmp/h.data --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -v "^#" | grep -v "^$" | head -60 > $OUT/perf.txt
  head -60 $OUT/perf.txt
elif command -v strace >/dev/null; then
  strace -f -c -o $OUT/strace.txt python3 dev20_host2.py luminav 1000 > /dev/null 2>&1; head -30 $OUT/strace.txt
fi
