# ab.sh ROUNDS NEWLIB: interleaved before/after of the F1 loop, each process also times torch fused AdamW
cd /tmp/wt13
for r in $(seq 1 $1); do
  for arm in base new; do
    lib=/tmp/wt13/base/libluminav.so.0; [ $arm = new ] && lib=$2
    echo "$arm $(PYTHONPATH=/tmp/wt13/pkg LD_PRELOAD=$lib /work/main/.venv/bin/python front.py 60 luminav fused)"
  done
done
