#!/usr/bin/env bash
# session 20, calls 2-8 on the warm machine of call 1 (dev20a.sh built /tmp/lm_site), from the repository root:
#   host  (call 2): opt.step() and the native step's host time after a pause      -> call2_host.log
#   knobs (call 3): the native step called back to back, three step-graph settings -> call3_knobs.txt
#   pause (call 4): the native step after a sync, a spin, a sleep, a backward       -> call4_host3.txt
#   trace (calls 5-8): LUMINAV_TRACE_HOST of a cold and a warm step                 -> call5_host_trace.txt
set -u
export OUT=${OUT:-$PWD/gpu_out}; mkdir -p $OUT
prefix=$PWD/.gpu_bundle/prefix
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/lm_site:bench
case ${1:?host, knobs, pause or trace} in
  host) timeout 200 python3 dev20_host.py luminav luminav_tdclm 2>&1 | grep -v Warn | tee $OUT/call2_host.log ;;
  knobs)
    for env in "" LUMINAV_CUDA_STEP_AGAIN=0 LUMINAV_CUDA_GRAPHS=0; do
      env $env timeout 60 python3 dev20_host2.py luminav 300 2>&1 | grep native | tee -a $OUT/call3_knobs.txt
    done ;;
  pause)
    for env in "" LUMINAV_CUDA_STEP_AGAIN=0; do
      env $env timeout 100 python3 dev20_host3.py luminav 2>&1 | grep -v Warn | tee -a $OUT/call4_host3.txt
    done ;;
  trace)
    LUMINAV_TRACE_HOST=1 timeout 100 python3 dev20_host4.py luminav 2>&1 \
      | grep -E "plan refresh|^---|issued|cold|warm" | tail -24 | tee $OUT/call5_host_trace.txt ;;
esac
