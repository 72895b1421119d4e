#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian machine:
# Debian packages through apt-get (only those missing) and a virtual
# environment in .venv with pinned PyPI packages. Safe to run repeatedly.
#   --free-threaded: also a free-threaded CPython 3.13t from Debian's source
#   (cached under /var/cache/luminamoon) and luminamoon built for it (issue 22).
set -euo pipefail
cd "$(dirname "$0")/.."
FREE_THREADED=0
[ "${1:-}" = "--free-threaded" ] && FREE_THREADED=1

DEB_PACKAGES=(
  build-essential pkg-config ninja-build
  libhwy-dev libtbb-dev libsimdjson-dev libxxhash-dev
  libvectorscan-dev libre2-dev libzstd-dev zlib1g-dev libisal-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev
  debootstrap
  clang libclang-rt-dev
  libvulkan-dev mesa-vulkan-drivers glslc glslang-tools spirv-tools vulkan-tools vulkan-validationlayers
  iproute2  # issue 17: `ip link set lo up` in the Ray tests' loopback-only network namespace
  libjemalloc2  # issue 15: the allocator of `luminamoon data run` (Note [the CLI's allocator])
)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install_deps] apt-get install ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "[install_deps] creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.requirements.stamp"
if [ ! -f "$stamp" ] || ! cmp -s requirements-dev.txt "$stamp"; then
  echo "[install_deps] pip install -r requirements-dev.txt"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -r requirements-dev.txt
  cp requirements-dev.txt "$stamp"
fi
if ((FREE_THREADED)); then
  ./scripts/build_free_threaded_python.sh
  ./scripts/build_free_threaded_package.sh
fi
