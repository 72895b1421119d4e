"""LuminaV from Python: one fused step over NumPy arrays or torch tensors, in place and zero-copy.

``step`` updates one parameter and its state through the C API
(``luminav_step_multi``) in one native call (``_native.functional_step``),
which checks every buffer first: dtype, contiguity, length, device and
overlap; it reads NumPy arrays itself and asks ``describe_buffer`` here about
anything else (torch tensors), so that a small step costs a few microseconds of
Python, also under the free-threaded interpreter. Hyperparameter ranges are
checked by the C library, whose message (naming the parameter and its value)
becomes the ``ValueError``. ``LuminaV`` (the ``torch.optim.Optimizer``) lives in
``luminamoon.optim.torch_optimizer``; the package imports it lazily, so that
NumPy users never import torch.

Errors:
  * ``ValueError``: a bad buffer or hyperparameter (C status INVALID_ARGUMENT).
  * ``NonFiniteGradientError`` (a subclass of ``ArithmeticError``, not of
    ``ValueError``, so that code catching configuration errors does not swallow
    it): a NaN or Inf gradient with ``check_finite``; nothing was written.
  * ``BackendUnavailableError`` (a ``RuntimeError``): the requested backend
    cannot run here (the message says why).
In every error case no buffer is modified.
"""
from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np

from .. import _native
from .errors import BackendUnavailableError, LuminaVError, NonFiniteGradientError, raise_for_status

__all__ = ["step", "synchronize", "backends", "last_backend"]

DTYPE_F32 = _native.DTYPE_F32
DTYPE_BF16 = _native.DTYPE_BF16
DTYPE_F16 = _native.DTYPE_F16
_DTYPE_NAMES = {DTYPE_F32: "float32", DTYPE_BF16: "bfloat16", DTYPE_F16: "float16"}
_FLOAT_DTYPES = frozenset(_DTYPE_NAMES)
# LuminaV's bound= per param group -> luminav_bound_mode ("rms" is an extension beyond the spec).
BOUND_MODES = {None: 0, "tensor": 1, "element": 2, "rms": 3}


# ---- buffers -------------------------------------------------------------------


class Buffer(NamedTuple):
    """A validated view of one array: where it lives and what it holds."""

    name: str
    ptr: int
    numel: int
    nbytes: int
    dtype: int          # DTYPE_*
    device_type: int    # _native.DEVICE_*
    device_index: int
    device_label: str   # "cpu", "cuda:0", for messages


def _torch_module():
    return sys.modules.get("torch")


def _device_of_torch(tensor, name: str) -> tuple[int, int, str]:
    device = tensor.device
    if device.type == "cpu":
        return _native.DEVICE_CPU, 0, "cpu"
    index = device.index if device.index is not None else 0
    if device.type == "cuda":
        torch = _torch_module()
        kind = _native.DEVICE_ROCM if getattr(torch.version, "hip", None) else _native.DEVICE_CUDA
        return kind, index, f"cuda:{index}"
    raise ValueError(
        f"{name} is on device '{device}', which no LuminaV backend serves "
        "(supported: cpu, cuda)")


_TORCH_DTYPE_CODES: dict = {}


def _torch_dtype_code(tensor) -> int | None:
    if not _TORCH_DTYPE_CODES:
        torch = _torch_module()
        _TORCH_DTYPE_CODES.update({torch.float32: DTYPE_F32, torch.bfloat16: DTYPE_BF16,
                                   torch.float16: DTYPE_F16})
    return _TORCH_DTYPE_CODES.get(tensor.dtype)


def _numpy_dtype_code(array: np.ndarray) -> int | None:
    dtype = array.dtype
    if not dtype.isnative:
        return None
    if dtype == np.float32:
        return DTYPE_F32
    if dtype == np.float16:
        return DTYPE_F16
    # bf16 from NumPy: raw bit patterns in uint16, or ml_dtypes.bfloat16.
    if dtype == np.uint16 or dtype.name == "bfloat16":
        return DTYPE_BF16
    return None


def describe_buffer(obj: Any, name: str, allowed: frozenset[int], *, writable: bool) -> Buffer:
    """Checks one array (layout, dtype, device, writability) and returns its raw view."""
    torch = _torch_module()
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            raise ValueError(f"{name}: {obj.layout} tensors are not supported (dense tensors only)")
        code = _torch_dtype_code(obj)
        if code is None or code not in allowed:
            if obj.is_complex():
                raise ValueError(f"{name}: complex tensors are not supported (dtype {obj.dtype})")
            raise ValueError(f"{name}: dtype {obj.dtype} is not supported here "
                             f"(expected {_allowed_names(allowed)})")
        if not obj.is_contiguous():
            raise ValueError(f"{name}: the tensor is not contiguous (shape {tuple(obj.shape)}, "
                             f"strides {obj.stride()}); pass .contiguous() or a dense tensor")
        if obj.is_cpu:
            device_type, device_index, label = _native.DEVICE_CPU, 0, "cpu"
        else:
            device_type, device_index, label = _device_of_torch(obj, name)
        numel = obj.numel()
        return Buffer(name, obj.data_ptr() if numel else 0, numel, numel * obj.element_size(),
                      code, device_type, device_index, label)
    if isinstance(obj, np.ndarray):
        code = _numpy_dtype_code(obj)
        if code is None or code not in allowed:
            raise ValueError(f"{name}: dtype {obj.dtype} is not supported here "
                             f"(expected {_allowed_names(allowed)}; bf16 as uint16 bits or ml_dtypes.bfloat16)")
        if not obj.flags.c_contiguous:
            raise ValueError(f"{name}: the array is not C-contiguous (strides {obj.strides})")
        if writable and not obj.flags.writeable:
            raise ValueError(f"{name}: the array is read-only but is updated in place")
        numel = obj.size
        return Buffer(name, obj.__array_interface__["data"][0] if numel else 0, numel, obj.nbytes,
                      code, _native.DEVICE_CPU, 0, "cpu")
    raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got {type(obj).__name__}")


def _allowed_names(allowed: frozenset[int]) -> str:
    return "/".join(_DTYPE_NAMES[c] for c in sorted(allowed))


def td_factor_code(td_factor: str) -> int:
    """The C enum of a td_factor name ("factored", "row" or "tensor"); ValueError otherwise."""
    return _native.td_factor_code(td_factor)


def rows_of(shape) -> int:
    """R of spec "TD-CLM second moment": the first dimension (1 for a 0-D tensor)."""
    return int(shape[0]) if len(shape) else 1


def make_hyperparams(*, lr, beta1, beta2, eps, weight_decay, tau, lam, buffer_mode, cautious,
                     bound_mode, bound_ratio, step, check_finite, stochastic_rounding,
                     grad_scale=1.0):
    """The C struct from Python values: float()/int()/truth of each (ranges are checked by the C
    library; a step outside [0, 2**64) is a ValueError here)."""
    return _native.hyperparams(lr, beta1, beta2, eps, weight_decay, tau, lam, buffer_mode, cautious,
                               bound_mode, bound_ratio, step, check_finite, stochastic_rounding,
                               grad_scale)


def cuda_stream_handle(device_index: int) -> int:
    """The current torch CUDA stream of a device, as a raw handle (0: default stream)."""
    torch = _torch_module()
    return int(torch.cuda.current_stream(device_index).cuda_stream)


# ---- the one-tensor step ---------------------------------------------------------


def step(param, grad, exp_avg, exp_avg_sq=None, master=None, *, lr: float, beta1: float,
         beta2: float, eps: float, weight_decay: float, tau: float = 0.0, lam: float = 0.0,
         buffer_mode: int = 2, cautious: bool = False, bound_mode: int = 0,
         bound_ratio: float = 0.0, step: int, seed: int = 0, check_finite: bool = True,
         stochastic_rounding: bool = True, backend: str = "auto", td_factor: str = "factored",
         rows: int | None = None, grad_scale: float = 1.0, asynchronous: bool = False) -> None:
    """One LuminaV step of one tensor, in place (spec/luminav-update.md).

    param: float32/bfloat16/float16 (NumPy bf16 as uint16 bit patterns or
    ml_dtypes.bfloat16); grad: the same dtypes; exp_avg: float32, N elements;
    exp_avg_sq: float32, N elements (CLM, buffer_mode=2) or, in TD-CLM
    (buffer_mode=1), luminav_exp_avg_sq_length floats: with td_factor
    "factored" R + C (R when C = 1), "row" R, "tensor" 1 (the scalar s), where
    R = `rows` (default: param's first dimension) and C = N / R; master:
    optional float32 working weights (N). `grad_scale` is the loss scale sigma
    (gradients are read as g / sigma). `step` is t >= 1, incremented by the caller before the call.
    16-bit parameters are written by stochastic rounding keyed on
    (seed, step, index) when `stochastic_rounding`, else round-to-nearest-even.

    ``asynchronous=True`` (host arrays): where the backend runs them on an
    accelerator (``backend="vulkan"``, CLM) the call returns before the step
    ran (luminav_step_groups_enqueue). The arrays must then not be read or
    written until ``synchronize()`` returns; they are kept alive until then.
    A NaN or Inf gradient makes that step, and every step after it until the
    error is raised, write nothing; the ``NonFiniteGradientError`` comes from
    the first later ``step(..., asynchronous=True)`` that finds it or from
    ``synchronize()``. Elsewhere the step runs synchronously.
    """
    failure = _functional_step(
        param, grad, exp_avg, exp_avg_sq, master, lr, beta1, beta2, eps, weight_decay, tau, lam,
        buffer_mode, cautious, bound_mode, bound_ratio, step, seed, check_finite,
        stochastic_rounding, backend, td_factor, rows, grad_scale, asynchronous)
    if failure is not None:
        raise_for_status(*failure)


def synchronize(backend: str = "auto") -> None:
    """Waits for the asynchronous steps of ``backend`` (``step(..., asynchronous=True)``): their
    results are then in the arrays, which may be read again. Raises the ``NonFiniteGradientError``
    of a step that found a NaN or Inf gradient, if no call raised it yet."""
    failure = _native.synchronize(backend)
    if failure is not None:
        raise_for_status(*failure)


# What the native step calls back for buffers it does not read itself (torch tensors,
# ml_dtypes.bfloat16, refused arrays: describe_buffer names the problem) and for
# CUDA tensors' current stream (Note [functional step checks] in
# src/python/optim_functional_step.cc), registered once: passed with every call,
# the shared tuple's reference count was an atomic both threads hit per step under
# the free-threaded interpreter (Note [hooks registered once]).
_NATIVE_HOOKS = (np.ndarray, describe_buffer, _FLOAT_DTYPES, frozenset({DTYPE_F32}), cuda_stream_handle)
_native.set_functional_hooks(_NATIVE_HOOKS)
_functional_step = _native.functional_step  # one global load per call, not a global and an attribute


# ---- introspection --------------------------------------------------------------


def backends() -> list[tuple[str, bool, str]]:
    """[(name, available, why not)] for every backend compiled into libluminav."""
    return [tuple(b) for b in _native.backends()]


def last_backend() -> str:
    """The backend (and SIMD target) that ran this thread's last successful step."""
    return _native.last_backend()

