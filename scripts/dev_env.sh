#!/usr/bin/env bash
# Creates .venvs/NAME, a light virtual environment that sees every package of
# .venv (through a .pth file) but installs luminamoon on its own, so that
# several builds can be tested side by side:
#   scripts/dev_env.sh simd && make test VENV=.venvs/simd BUILD_DIR=build/simd
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: dev_env.sh NAME}
./scripts/install_deps.sh
venv=.venvs/$name
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  base=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base" > "$own/_luminamoon_base_venv.pth"
  cp requirements-dev.txt "$venv/.requirements.stamp"
  ln -sf "$PWD/.venv/bin/pytest" "$PWD/.venv/bin/cmake" "$PWD/.venv/bin/ninja" "$venv/bin/" 2>/dev/null || true
fi
echo "$venv"
