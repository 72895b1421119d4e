"""The exceptions of LuminaV and the one mapping from C status codes to them."""
from __future__ import annotations

from .. import _native

__all__ = ["LuminaVError", "NonFiniteGradientError", "BackendUnavailableError", "raise_for_status"]


class LuminaVError(RuntimeError):
    """An error status of the C library other than a bad argument or a non-finite gradient."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class NonFiniteGradientError(ArithmeticError):
    """A gradient holds NaN or +-Inf (``check_finite``); no parameter or state was modified.

    ``parameter`` names the offending parameter where the caller knows it
    (the optimizer sets it), else it is None.
    """

    def __init__(self, message: str, parameter: str | None = None):
        super().__init__(message)
        self.parameter = parameter


class BackendUnavailableError(LuminaVError):
    """The requested backend cannot run on this machine."""


def raise_for_status(status: int, message: str) -> None:
    """Turns a C status and message into the matching Python exception."""
    if status == _native.STATUS_OK:
        return
    name = _native.status_name(status)
    text = message or name
    if status == _native.STATUS_INVALID_ARGUMENT:
        raise ValueError(text)
    if status == _native.STATUS_NONFINITE_GRAD:
        raise NonFiniteGradientError(text)
    if status == _native.STATUS_BACKEND_UNAVAILABLE:
        raise BackendUnavailableError(text, status)
    raise LuminaVError(f"{name}: {text}", status)
