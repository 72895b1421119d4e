set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/site:bench
timeout 100 python3 dev20_host3.py luminav 2>&1 | grep -v Warn | tee $OUT/host3.txt
LUMINAV_CUDA_STEP_AGAIN=0 timeout 100 python3 dev20_host3.py luminav 2>&1 | grep -v Warn | tee -a $OUT/host3.txt
