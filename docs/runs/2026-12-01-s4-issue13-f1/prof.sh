# prof.sh OUT [preload]: perf of the step loop only (attached after setup)
out=$1; pre=$2
cd /tmp/wt13
PYTHONPATH=/tmp/wt13/pkg LD_PRELOAD=$pre /work/main/.venv/bin/python prof.py 100000 > $out.log 2>&1 &
pid=$!
until grep -q ready $out.log; do sleep 0.5; done
perf record -F 2000 -g -p $pid -o $out.data -- sleep 4 > /dev/null 2>&1
kill $pid
