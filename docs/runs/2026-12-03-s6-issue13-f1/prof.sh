# prof.sh PYTHON OUT [SECONDS]: perf profile (call graphs) of prof_f1.py's step loop, attached once
# the setup is done (the script prints "ready"), for SECONDS (default 10).
cd "$(dirname "$0")"
log=$(mktemp)
"$1" prof_f1.py $(( ${3:-10} + 15 )) > "$log" & pid=$!
until grep -q ready "$log"; do sleep 0.5; done
sleep 1
perf record -F ${PERF_FREQ:-4000} ${PERF_CG:--g} -p $pid -o "$2" -- sleep "${3:-10}" 2>&1 | tail -1
kill $pid; wait $pid 2>/dev/null; rm -f "$log"
