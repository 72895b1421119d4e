#!/bin/bash
# Session 22: the Parquet writer's zstd level in the whole CLI (row P2f). One build; each round runs
# the command at level 3 (the old default), 1 (the new default, Arrow's own) and -1, alternating, on
# the real corpus (gz JSONL in, Parquet out, 2 threads), with the CPU time and peak RSS of each run
# (GNU time) and the size of the output. Usage: zstd_level.sh CORPUS_DIR ROUNDS > log
set -eu
corpus=$1; rounds=${2:-15}; py=${PY:-.venv/bin/python}; out=$(mktemp -d)
for l in 3 1 -1; do printf '[output]\ncompression_level = %s\n' "$l" > "$out/level$l.toml"; done
for r in $(seq "$rounds"); do
  for l in 3 1 -1; do
    rm -rf "$out/o"
    /usr/bin/time -f "level $l cpu %U %S rss_kb %M" "$py" -m luminamoon.cli data run "$corpus" -o "$out/o" \
      --no-resume --progress none --threads 2 --config "$out/level$l.toml" > /dev/null
    echo "level $l bytes $(du -sb "$out/o" | cut -f1)"
  done
done 2>&1
rm -rf "$out"
