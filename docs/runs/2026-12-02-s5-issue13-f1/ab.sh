# ab.sh ROUNDS [F1_STEPS] [COLD_STEPS]: before/after in alternating processes. before = the lead's
# install of main at 1b886b8 (/work/main/.venv), after = this branch's build (.venvs/wt13f);
# the same torch, the same bench/ helpers. Each line: us per parameter (f1_*), us per step (cold_*, warm_*).
cd "$(dirname "$0")"
for r in $(seq 1 "$1"); do
  for arm in before after; do
    py=/work/main/.venv/bin/python; [ $arm = after ] && py=/work/wt13f/.venvs/wt13f/bin/python
    echo "$arm $($py front.py ${2:-60} ${3:-20})"
  done
done
