# ab.sh ROUNDS [F1_STEPS] [COLD_STEPS]: before/after in alternating processes, the same python and torch.
# before = the lead's install of main at 1b886b8 (/work/main/.venv); after = that install with this
# branch's python files, _native module and libluminav (assembled in /tmp/wt13f_pkg by assemble.sh).
# Each line: us per parameter (f1_*), us per opt.step() (cold_*, warm_*), the load average.
cd "$(dirname "$0")"
for r in $(seq 1 "$1"); do
  for arm in before after; do
    pp=; [ $arm = after ] && pp=/tmp/wt13f_pkg
    echo "$arm $(PYTHONPATH=$pp /work/main/.venv/bin/python front.py ${2:-60} ${3:-20})"
  done
done
