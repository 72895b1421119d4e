"""LuminaMoon: the LuminaV fused optimizer and a streaming LLM data engine."""
from __future__ import annotations

import os

__version__ = "0.1.0"

# os.path, not pathlib or glob: `luminamoon data run` imports this package before
# it replaces itself (Note [the CLI's allocator]), and pathlib costs ~5 ms there.
_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))


def c_library_path() -> str:
    """Path of the installed shared library ``libluminav`` (for C users and ctypes)."""
    import glob
    lib_dir = os.path.join(_PACKAGE_DIR, "lib")
    candidates = (sorted(glob.glob(os.path.join(lib_dir, "libluminav.so*")))
                  + sorted(glob.glob(os.path.join(lib_dir, "libluminav*.dylib"))))
    if not candidates:
        raise FileNotFoundError(f"libluminav not found under {lib_dir}")
    # The unversioned link or the shortest name is the one to dlopen.
    return min(candidates, key=lambda p: len(os.path.basename(p)))


def include_dir() -> str:
    """Directory of the installed C headers (luminav/luminav.h, luminav_triton_standalone.h)."""
    return os.path.join(_PACKAGE_DIR, "include")
