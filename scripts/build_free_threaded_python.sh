#!/usr/bin/env bash
# Builds a free-threaded CPython (PEP 703, ./configure --disable-gil) from
# Debian's python3.13 source package into a cached prefix, once per machine:
#   scripts/build_free_threaded_python.sh            # -> $LUMINA_FT_PREFIX/bin/python3.13t
# Bookworm ships no Python 3.13 and PyPI no Linux CPython, so the source
# comes from trixie's archive (a deb-src line in a private apt state under
# the cache, so the machine's own apt sources stay untouched). The upstream
# tarball of the source package is built (Debian's patches target Debian's
# own layout under /usr). No PGO/LTO: a plain build on 2 shared cores.
# Cost on this 2-core VM: ~15 s download, ~10 min build (see docs/benchmarks.md).
set -euo pipefail

CACHE=${LUMINA_CACHE:-/var/cache/luminamoon}
PREFIX=${LUMINA_FT_PREFIX:-$CACHE/python3.13t}
SUITE=${LUMINA_FT_SUITE:-trixie}
SRC_PACKAGE=python3.13
JOBS=${JOBS:-2}
PY=$PREFIX/bin/python3.13t

if [ -x "$PY" ] && "$PY" -c 'import sys, ctypes, ssl, zlib; sys.exit(sys._is_gil_enabled())' 2>/dev/null; then
  echo "[free-threaded] cached: $PY"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] && [ ! -w "$CACHE" ]; then
  echo "[free-threaded] needs root or a writable $CACHE" >&2
  exit 1
fi

# CPython's optional modules this package and pip need (ctypes, ssl, zlib, lzma, bz2, sqlite3).
build_deps=(build-essential dpkg-dev libffi-dev libssl-dev zlib1g-dev libbz2-dev liblzma-dev libsqlite3-dev uuid-dev)
missing=()
for p in "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[free-threaded] apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

apt_dir=$CACHE/apt
mkdir -p "$apt_dir/lists/partial" "$CACHE/src"
echo "deb-src http://deb.debian.org/debian $SUITE main" > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists")
cd "$CACHE/src"
if ! ls ${SRC_PACKAGE}_*.orig.tar.xz >/dev/null 2>&1; then
  apt-get -qq "${apt_opts[@]}" update
  # apt checks the archive's signature and the files' hashes against the .dsc.
  apt-get -qq "${apt_opts[@]}" source --download-only "$SRC_PACKAGE"
fi
orig=$(ls ${SRC_PACKAGE}_*.orig.tar.xz | sort | tail -1)
version=${orig#${SRC_PACKAGE}_}
version=${version%.orig.tar.xz}
work=$CACHE/src/build-$version
rm -rf "$work"
mkdir -p "$work"
tar -xf "$orig" -C "$work" --strip-components=1
cd "$work"
echo "[free-threaded] building CPython $version --disable-gil into $PREFIX"
./configure --disable-gil --prefix="$PREFIX" --with-ensurepip=install >configure.log 2>&1 ||
  { tail -30 configure.log >&2; exit 1; }
nice -n 10 make -j"$JOBS" >make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
nice -n 10 make install >install.log 2>&1 || { tail -40 install.log >&2; exit 1; }
cd "$CACHE/src" && rm -rf "$work"
"$PY" -c 'import sys, ctypes, ssl, zlib; assert not sys._is_gil_enabled(); print("[free-threaded] ok:", sys.version)'
