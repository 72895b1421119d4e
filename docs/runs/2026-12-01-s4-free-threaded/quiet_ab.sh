#!/usr/bin/env bash
# Waits for a quiet moment (1-min load < $MAXLOAD and >= $MINIDLE% idle over 3 s), then one A/B round.
cd /work/wt22
OUT=docs/runs/2026-12-01-s4-free-threaded
PY=build/free-threaded/venv/bin/python
MAXLOAD=${MAXLOAD:-2.5}; MINIDLE=${MINIDLE:-80}; UNTIL=${UNTIL:-$(date -d '23:38' +%s)}
idle() { read -r _ a b c d e f g _ < /proc/stat; t1=$((a+b+c+d+e+f+g)); i1=$d; sleep 3; read -r _ a b c d e f g _ < /proc/stat; t2=$((a+b+c+d+e+f+g)); echo $(( 100*(d-i1)/(t2-t1) )); }
round=0
while [ $(date +%s) -lt $UNTIL ] && [ $round -lt ${ROUNDS:-3} ]; do
  l=$(cut -d' ' -f1 /proc/loadavg); id=$(idle)
  if awk "BEGIN{exit !($l < $MAXLOAD && $id >= $MINIDLE)}"; then
    round=$((round+1)); echo "=== round $round $(date -u +%H:%M:%S) load $l idle $id%"
    $PY bench/free_threaded_scaling.py --repeats 5 --only control --json $OUT/quietB${round}_control.json | tail -1
    for sb in main worker; do for pkg in before after; do
      if [ $pkg = before ]; then PP=/tmp/wt22/before; else PP=; fi
      echo -n "$pkg state-by $sb: "
      PYTHONPATH=$PP $PY bench/free_threaded_scaling.py --repeats 5 --only 4K --state-by $sb --json $OUT/quietB${round}_${pkg}_${sb}.json | tail -1
    done; done
    echo "idle after: $(idle)% load $(cut -d' ' -f1-3 /proc/loadavg)"
  else sleep 20; fi
done
