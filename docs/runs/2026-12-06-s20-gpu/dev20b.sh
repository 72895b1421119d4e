set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nproc; lscpu | grep "Model name"
PYTHONPATH=/tmp/site:bench timeout 200 python3 dev20_host.py luminav luminav_tdclm 2>&1 | grep -v Warn | tee $OUT/host.log
