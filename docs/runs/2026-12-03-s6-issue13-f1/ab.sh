# ab.sh ROUNDS: same-run A/B of the F1 step. before = main at 45f4313 installed in .venvs/f13base,
# after = this branch installed in .venvs/f13 (both: the same python 3.11 and torch 2.13 through the
# shared base venv, the same build options: LUMINA_CUDA_KERNELS=OFF LUMINA_TRITON_AOT=OFF, build
# folder build/release); one process per arm, the arms alternated in every round (f1_cpu.py 40).
cd "$(dirname "$0")"
root=../../..
for r in $(seq 1 "$1"); do
  for arm in before after; do
    venv=$root/.venvs/f13; [ $arm = before ] && venv=$root/.venvs/f13base
    echo "$arm $("$venv/bin/python" f1_cpu.py 40)"
  done
done
