"""luminamoon.optim: the LuminaV optimizer from Python.

- ``step`` (functional.py): one fused step over NumPy arrays or torch tensors;
  ``synchronize`` waits for the steps made with ``asynchronous=True``.
- ``LuminaV`` (torch_optimizer.py): the ``torch.optim.Optimizer``; imported on
  first use, so that NumPy users never load torch.
- the exceptions (errors.py).
"""
from __future__ import annotations

from .errors import BackendUnavailableError, LuminaVError, NonFiniteGradientError
from .functional import backends, last_backend, step, synchronize

__all__ = ["step", "synchronize", "LuminaV", "NonFiniteGradientError", "BackendUnavailableError", "LuminaVError",
           "backends", "last_backend"]


def __getattr__(name: str):
    if name == "LuminaV":
        from .torch_optimizer import LuminaV
        return LuminaV
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
