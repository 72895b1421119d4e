"""The wheel of `make wheel` on a bare Debian: only python3 and python3-venv, no network.

A minimal bookworm root (debootstrap minbase + python3 + python3-venv, cached
by scripts/bare_debian_root.sh under /var/cache/luminamoon) gets the wheel
and NumPy's wheel in a local folder; inside the root, with no network
(a new network namespace), pip installs them with --no-index, then
`luminamoon info` and bare_root_checks.py run (a functional optimizer step
against the float64 reference, a small JSONL -> NDJSON pipeline). Nothing of
ours outside the wheel exists there, so a library the wheel forgot to bundle
fails the import. Skipped, with the reason, without root, debootstrap or a wheel.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("LUMINA_CACHE", "/var/cache/luminamoon"))
# Each root and the wheel its python3 takes: bookworm's 3.11 the version-specific
# wheel of a 3.11 build, trixie's 3.13 the cp312-abi3 wheel of a >= 3.12 build.
SUITES = {"bookworm": ("3.11", "cp311-cp311"), "trixie": ("3.13", "cp312-abi3")}


def _wheel(tag: str = "cp311-cp311") -> Path | None:
    dist = Path(os.environ.get("LUMINA_WHEEL_DIR", REPO / "dist"))
    found = sorted(dist.glob(f"luminamoon-*-{tag}-manylinux*.whl"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _skip_reason(suite: str) -> str | None:
    tag = SUITES[suite][1]
    if sys.platform != "linux":
        return "Linux only"
    if os.geteuid() != 0:
        return "needs root (debootstrap, chroot, a network namespace)"
    if not (CACHE / "roots" / suite / ".luminamoon-root-ready").exists() and shutil.which("debootstrap") is None:
        return "debootstrap is not installed and no cached root exists"
    if shutil.which("unshare") is None or shutil.which("chroot") is None:
        return "unshare/chroot missing (util-linux, coreutils)"
    if _wheel(tag) is None:
        return f"no {tag} manylinux wheel in dist/ (`make wheel`; {tag} needs a Python {tag[2]}.{tag[3:5]} build)"
    return None


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def _numpy_wheel(folder: Path, python_version: str) -> Path:
    """NumPy's manylinux wheel for the root's Python, downloaded once into the cache."""
    import numpy
    abi = "cp" + python_version.replace(".", "")
    pattern = f"numpy-{numpy.__version__}-{abi}-{abi}-*manylinux*x86_64.whl"
    cached = sorted((CACHE / "wheels").glob(pattern))
    if not cached:
        r = _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                  "--python-version", python_version, "--implementation", "cp", "--abi", abi,
                  "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
                  "-d", str(CACHE / "wheels"), f"numpy=={numpy.__version__}"], timeout=300)
        if r.returncode != 0:
            pytest.skip(f"could not download NumPy's wheel for the root: {r.stderr[-300:]}")
        cached = sorted((CACHE / "wheels").glob(pattern))
    shutil.copy2(cached[-1], folder)
    return cached[-1]


def _bare_root(suite: str) -> Path:
    reason = _skip_reason(suite)
    if reason:
        pytest.skip(reason)
    r = _run([str(REPO / "scripts" / "bare_debian_root.sh"), suite], timeout=900)
    if r.returncode != 0:
        pytest.skip(f"could not make the bare {suite} root: {r.stderr[-400:]}")
    return Path(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tag", sorted({t for _, t in SUITES.values()}))
def test_the_wheel_bundles_its_libraries(tag):
    """The Debian libraries the extensions link are inside the wheel; pyarrow's Arrow is not."""
    whl = _wheel(tag)
    if whl is None:
        pytest.skip(f"no {tag} wheel in dist/ (`make wheel`)")
    names = zipfile.ZipFile(whl).namelist()
    bundled = [n for n in names if n.startswith("luminamoon.libs/")]
    for lib in ("libtbb", "libhwy", "libsimdjson", "libxxhash", "libhs", "libzstd", "libisal"):
        assert any(Path(n).name.startswith(lib) for n in bundled), f"{lib} not bundled: {bundled}"
    assert not any("libarrow" in n or "libparquet" in n for n in names), "pyarrow's Arrow must not be bundled"


@pytest.mark.parametrize("suite", list(SUITES))
def test_wheel_installs_and_runs_on_a_bare_debian(suite):
    root = _bare_root(suite)
    python_version, tag = SUITES[suite]
    whl = _wheel(tag)
    stage = root / "tmp" / "luminamoon-wheel-test"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "wheels").mkdir(parents=True)
    try:
        shutil.copy2(whl, stage / "wheels")
        _numpy_wheel(stage / "wheels", python_version)
        shutil.copy2(HERE / "bare_root_checks.py", stage)
        shutil.copy2(REPO / "tests" / "luminav_reference.py", stage)
        inner = "/tmp/luminamoon-wheel-test"
        script = " && ".join([
            "mount -t proc proc /proc",
            f"python3 -c 'import sys; assert sys.version.startswith(\"{python_version}\"), sys.version'",
            f"python3 -m venv {inner}/venv",
            f"{inner}/venv/bin/pip install -q --no-index --find-links {inner}/wheels luminamoon",
            f"{inner}/venv/bin/luminamoon info",
            f"cd {inner} && {inner}/venv/bin/python bare_root_checks.py",
        ])
        # A private mount and network namespace: /proc is mounted for the root
        # only, and there is no network inside (only loopback, down).
        r = _run(["unshare", "--mount", "--net", "--fork", "chroot", str(root),
                  "/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8",
                  "/bin/sh", "-c", script], timeout=600)
        out = r.stdout + r.stderr
        assert r.returncode == 0, f"inside the bare {suite} root:\n{out}"
        assert "Backends" in out and "simd" in out, out
        assert "within the spec bound" in out and "duplicate dropped" in out, out
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def test_demo_runs_from_the_wheel(tmp_path):
    """`luminamoon demo` from the installed wheel (this machine's torch and scikit-learn beside it)."""
    own = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    whl = _wheel(f"{own}-{own}") or (_wheel("cp312-abi3") if sys.version_info >= (3, 12) else None)
    if whl is None:
        pytest.skip("no wheel for this Python in dist/ (`make wheel`)")
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    target = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
              str(whl)], timeout=300)
    assert r.returncode == 0, r.stderr
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import luminamoon, luminamoon.cli as c; "
            "assert luminamoon.__file__.startswith(sys.argv[1]), luminamoon.__file__; "
            "sys.exit(c.main(['demo', '--steps', '20']))")
    r = _run([sys.executable, "-c", code, str(target)], timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LuminaV CLM" in r.stdout and "AdamW" in r.stdout
