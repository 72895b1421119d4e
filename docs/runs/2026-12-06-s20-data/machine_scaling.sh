#!/bin/bash
# the machine's own 2-process scaling on this workload: one 1-thread CLI run over the 8 shards,
# against two 1-thread CLI runs over 4 shards each, started together (no shared state, no Ray)
P=/work/main/.venv/bin/python
run() { $P -m luminamoon.cli data run "$1" -o "$2" --no-resume --threads 1 --format ndjson --progress none > /dev/null 2>&1; }
for r in 1 2 3 4 5; do
  rm -rf /tmp/ms_o /tmp/ms_a /tmp/ms_b; sync
  t0=$(date +%s.%N); run /tmp/luminamoon-ray-bench/corpus /tmp/ms_o; t1=$(date +%s.%N)
  rm -rf /tmp/ms_o; sync
  t2=$(date +%s.%N); run /tmp/half1 /tmp/ms_a & run /tmp/half2 /tmp/ms_b & wait; t3=$(date +%s.%N)
  python3 -c "a=$t1-$t0; b=$t3-$t2; print(f'one process 8 shards {a:.2f} s, two processes 4 shards each {b:.2f} s, ratio {a/b:.2f}')"
done
rm -rf /tmp/ms_o /tmp/ms_a /tmp/ms_b
