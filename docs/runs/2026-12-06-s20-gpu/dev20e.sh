set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/site:bench
LUMINAV_TRACE_HOST=1 timeout 100 python3 dev20_host4.py luminav 2>&1 | grep -E "plan refresh|^---|issued|cold|warm" | tail -24 | tee $OUT/host4.txt
