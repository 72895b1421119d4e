#!/bin/bash
# The fuzzers were built as scripts/sanitizer_tests.sh builds them, in /tmp/fuzzbuild:
#   cmake -S . -B /tmp/fuzzbuild -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
#     -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLUMINA_SANITIZE=address,undefined \
#     -DLUMINA_WITH_OPTIM=OFF -DLUMINA_BUILD_PYTHON=OFF -DLUMINA_BUILD_TESTS=ON -DLUMINA_HWY_STATIC_ONLY=ON \
#     -DLUMINA_BUILD_FUZZERS=ON -DLUMINA_FUZZ_PYTHON=$PWD/.venv/bin/python
#   ninja -C /tmp/fuzzbuild fuzz_checkpoint_meta fuzz_commit_record ... (the ten targets of fuzz/)
# a longer fuzz campaign than CI's 20 s: each target SECS seconds, two at a time
SECS=${SECS:-150}
cd /work/main
run() {
  t=$1; w=/tmp/fuzzwork/$t; rm -rf $w; mkdir -p $w/corpus
  cp fuzz/corpus/$t/* $w/corpus/ 2>/dev/null; [ -d fuzz/regressions/$t ] && cp fuzz/regressions/$t/* $w/corpus/ 2>/dev/null
  /tmp/fuzzbuild/fuzz/$t -rss_limit_mb=2560 -timeout=25 -print_final_stats=1 -max_total_time=$SECS -artifact_prefix=$w/ $w/corpus > $w/log 2>&1
  echo "$t rc=$? $(grep -E 'stat::number_of_executed_units' $w/log | tail -1) $(ls $w | grep -E 'crash|timeout|oom|leak' | tr '\n' ' ')"
}
targets=(fuzz_checkpoint_meta fuzz_commit_record fuzz_dedup_wal fuzz_jsonl_reader fuzz_kernel_manifest fuzz_lsh_index fuzz_parquet_reader fuzz_pii_masker fuzz_text_cleaner fuzz_txt_reader)
for ((i=0; i<${#targets[@]}; i+=2)); do
  run ${targets[$i]} & run ${targets[$((i+1))]} & wait
done
