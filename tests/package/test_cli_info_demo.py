"""`luminamoon info` and `luminamoon demo` (the console script's optimizer commands)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import luminamoon
from luminamoon import _native, cli
from luminamoon.info import collect


def test_info_lists_cpu_features_backends_and_versions(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CPU features" in out
    for feature in _native.cpu_features().split(","):
        assert feature in out
    for name, available, why_not in _native.backends():
        line = next(l for l in out.splitlines() if l.strip().startswith(name + " "))
        assert ("unavailable: " + why_not) in line if not available else "available" in line
    assert re.search(r"luminamoon\s+" + re.escape(luminamoon.__version__), out)
    assert re.search(r"libluminav\s+" + re.escape(_native.version()), out)
    assert re.search(r"numpy\s+" + re.escape(np.__version__), out)
    assert "torch" in out and "pyarrow" in out


def test_info_reports_the_highway_target_when_simd_runs():
    info = collect()
    simd = [b for b in info["backends"] if b["name"] == "simd"]
    if simd and simd[0]["available"]:
        assert simd[0]["target"], simd  # e.g. "AVX3"
    assert "scalar" in [b["name"] for b in info["backends"]]


def test_demo_prints_the_three_curves_and_clm_equals_adamw(capsys):
    assert cli.main(["demo", "--steps", "40"]) == 0
    out = capsys.readouterr().out
    header = next(l for l in out.splitlines() if l.startswith("step"))
    assert "AdamW" in header and "LuminaV CLM" in header and "LuminaV TD-CLM" in header
    rows = [l.split() for l in out.splitlines() if re.match(r"^\s*\d+\s+\d", l)]
    assert len(rows) >= 5
    first, last = [float(v) for v in rows[0][1:]], [float(v) for v in rows[-1][1:]]
    assert all(b < a for a, b in zip(first, last))  # every optimizer lowers the loss
    assert abs(last[0] - last[1]) < 1e-4           # CLM follows AdamW
    gap = float(re.search(r"difference over 40 steps: ([0-9.e+-]+)", out).group(1))
    assert gap < 1e-4


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("luminamoon")
    script = str(exe) if exe.exists() else shutil.which("luminamoon")
    assert script, "the luminamoon console script is not installed"
    out = subprocess.run([script, "info"], check=True, capture_output=True, text=True).stdout
    assert "Backends" in out
