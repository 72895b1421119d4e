"""Compatibility modules for the names that moved when the package was laid out by area."""
from __future__ import annotations

import importlib
import sys
import warnings


def reexport(old: str, new: str) -> None:
    """Makes module ``old`` an alias of ``new`` and warns once, at import, naming both."""
    warnings.warn(f"{old} is deprecated; import {new} instead", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
