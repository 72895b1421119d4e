# ab_cpu.sh ROUNDS: as ab.sh with front_cpu.py (wall and thread CPU time; F1 in us per parameter
# = the ms per step shown, since a step has 1,000 parameters; after-backward in us per step).
cd "$(dirname "$0")"
for r in $(seq 1 "$1"); do
  for arm in before after; do
    pp=; [ $arm = after ] && pp=/tmp/wt13f_pkg
    echo "$arm $(PYTHONPATH=$pp /work/main/.venv/bin/python front_cpu.py 40 20)"
  done
done
