# ab_s5.sh ROUNDS: the same A/B with session 5's script, unchanged
# (docs/runs/2026-12-02-s5-issue13-f1/front_cpu.py 40 20: F1 with `p.grad = torch.full_like(p, 0.01)`
# before every step, 40 steps, and the step after a backward pass of bench's TinyDeepModel, cold and
# warm, 20 steps), one process per arm per round, the arms alternated. before = main at 45f4313
# (.venvs/f13base), after = this branch (.venvs/f13).
cd "$(dirname "$0")"
root=../../..
for r in $(seq 1 "$1"); do
  for arm in before after; do
    venv=$root/.venvs/f13; [ $arm = before ] && venv=$root/.venvs/f13base
    echo "$arm $("$venv/bin/python" ../2026-12-02-s5-issue13-f1/front_cpu.py 40 20)"
  done
done
