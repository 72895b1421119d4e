#!/usr/bin/env bash
# Makes (once, cached) a minimal Debian root with only python3 and python3-venv
# on top of debootstrap's minbase, for testing that a wheel carries every
# library it needs:   scripts/bare_debian_root.sh [SUITE]   -> prints the root's path
# The root lives outside the repository ($LUMINA_CACHE, /var/cache/luminamoon by
# default) and survives between CI runs of one machine; a stamp file marks a
# finished root, so an interrupted debootstrap is redone, never half-used.
# Cost on this 2-core VM: ~2-3 min on a fresh machine, 0 s when cached.
set -euo pipefail

SUITE=${1:-bookworm}
CACHE=${LUMINA_CACHE:-/var/cache/luminamoon}
ROOT=$CACHE/roots/$SUITE
MIRROR=${LUMINA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
STAMP=$ROOT/.luminamoon-root-ready

if [ -f "$STAMP" ]; then
  echo "$ROOT"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "[bare-root] debootstrap needs root" >&2
  exit 2
fi
if ! command -v debootstrap >/dev/null; then
  echo "[bare-root] debootstrap missing (apt-get install debootstrap)" >&2
  exit 2
fi
rm -rf "$ROOT"
mkdir -p "$ROOT"
echo "[bare-root] debootstrap --variant=minbase $SUITE $ROOT" >&2
debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$ROOT" "$MIRROR" \
  >"$CACHE/roots/$SUITE.debootstrap.log" 2>&1 ||
  { tail -20 "$CACHE/roots/$SUITE.debootstrap.log" >&2; exit 1; }
# Keep the root small: no package lists or .deb cache.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
touch "$STAMP"
echo "$ROOT"
