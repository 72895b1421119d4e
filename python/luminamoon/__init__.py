"""LuminaMoon: the LuminaV fused optimizer and a streaming LLM data engine."""
from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

_PACKAGE_DIR = Path(__file__).resolve().parent


def c_library_path() -> str:
    """Path of the installed shared library ``libluminav`` (for C users and ctypes)."""
    lib_dir = _PACKAGE_DIR / "lib"
    candidates = sorted(lib_dir.glob("libluminav.so*")) + sorted(lib_dir.glob("libluminav*.dylib"))
    if not candidates:
        raise FileNotFoundError(f"libluminav not found under {lib_dir}")
    # The unversioned link or the shortest name is the one to dlopen.
    return str(min(candidates, key=lambda p: len(p.name)))


def include_dir() -> str:
    """Directory of the installed C headers (luminav/luminav.h, luminav_triton_standalone.h)."""
    return str(_PACKAGE_DIR / "include")
