"""LuminaV from Python: one fused step over NumPy arrays or torch tensors, in place and zero-copy.

``step`` updates one parameter and its state through the C API
(``luminav_step_multi``) after checking every buffer here: dtype, contiguity,
length, device and overlap. Hyperparameter ranges are checked by the C
library, whose message (naming the parameter and its value) becomes the
``ValueError``. ``LuminaV`` (the ``torch.optim.Optimizer``) lives in
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

import os

import sys
from typing import Any, NamedTuple

import numpy as np

from .. import _native
from .errors import BackendUnavailableError, LuminaVError, NonFiniteGradientError, raise_for_status

__all__ = ["step", "backends", "last_backend"]

DTYPE_F32 = _native.DTYPE_F32
DTYPE_BF16 = _native.DTYPE_BF16
DTYPE_F16 = _native.DTYPE_F16
_DTYPE_NAMES = {DTYPE_F32: "float32", DTYPE_BF16: "bfloat16", DTYPE_F16: "float16"}
_FLOAT_DTYPES = frozenset(_DTYPE_NAMES)
_UINT64_LIMIT = 1 << 64


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


def check_no_overlap(buffers: list[Buffer]) -> None:
    """Refuses aliasing: no two buffers of one call may share a byte (as the C API demands).

    Note [overlap sweep]: sorted by start address, a buffer overlaps an earlier
    one iff it starts before the furthest end seen so far: O(n log n) for the
    thousands of buffers of a multi-tensor call.
    """
    ranges = sorted((b for b in buffers if b.nbytes), key=lambda b: (b.device_label, b.ptr))
    furthest = None
    for b in ranges:
        if furthest is not None and furthest.device_label == b.device_label and \
                b.ptr < furthest.ptr + furthest.nbytes:
            raise ValueError(f"{furthest.name} and {b.name} overlap in memory (aliasing); "
                             "every buffer of a step must be separate")
        if furthest is None or furthest.device_label != b.device_label or \
                b.ptr + b.nbytes > furthest.ptr + furthest.nbytes:
            furthest = b


TD_FACTORS = {"factored": _native.TD_FACTORED, "row": _native.TD_ROW, "tensor": _native.TD_TENSOR}


def td_factor_code(td_factor: str) -> int:
    """The C enum of a td_factor name ("factored", "row" or "tensor")."""
    if td_factor not in TD_FACTORS:
        raise ValueError(f"td_factor = {td_factor!r}: must be one of {', '.join(TD_FACTORS)}")
    return TD_FACTORS[td_factor]


def rows_of(shape) -> int:
    """R of spec "TD-CLM second moment": the first dimension (1 for a 0-D tensor)."""
    return int(shape[0]) if len(shape) else 1


def make_hyperparams(*, lr, beta1, beta2, eps, weight_decay, tau, lam, buffer_mode, cautious,
                     bound_mode, bound_ratio, step, check_finite, stochastic_rounding,
                     grad_scale=1.0):
    """The C struct from Python values (ranges are checked by the C library)."""
    step_int = int(step)
    if step_int < 0 or step_int >= _UINT64_LIMIT:
        raise ValueError(f"step = {step}: the step number t must be >= 1")
    hp = _native.Hyperparams()
    hp.lr = float(lr)
    hp.beta1 = float(beta1)
    hp.beta2 = float(beta2)
    hp.eps = float(eps)
    hp.weight_decay = float(weight_decay)
    hp.tau = float(tau)
    hp.lam = float(lam)
    hp.bound_ratio = float(bound_ratio)
    hp.buffer_mode = int(buffer_mode)
    hp.cautious = 1 if cautious else 0
    hp.bound_mode = int(bound_mode)
    hp.check_finite = 1 if check_finite else 0
    hp.stochastic_rounding = 1 if stochastic_rounding else 0
    hp.step = step_int
    hp.grad_scale = float(grad_scale)
    return hp


def run_options(device_type: int, device_index: int, backend: str, stream: int = 0):
    """Where to run; CUDA tensors route to the cuda backend when `backend` is "auto", unless
    LUMINAV_FORCE_BACKEND names one (the library's dispatcher then applies it, e.g. triton-aot)."""
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string, got {type(backend).__name__}")
    forced = os.environ.get("LUMINAV_FORCE_BACKEND", "") not in ("", "auto")
    if device_type == _native.DEVICE_CUDA and backend == "auto" and not forced:
        backend = "cuda"
    return _native.RunOptions(backend, device_type, device_index, stream)


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
         rows: int | None = None, grad_scale: float = 1.0) -> None:
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
    """
    p = describe_buffer(param, "param", _FLOAT_DTYPES, writable=True)
    g = describe_buffer(grad, "grad", _FLOAT_DTYPES, writable=False)
    m = describe_buffer(exp_avg, "exp_avg", frozenset({DTYPE_F32}), writable=True)
    buffers = [p, g, m]
    for b in (g, m):
        if b.numel != p.numel:
            raise ValueError(f"{b.name} has {b.numel} elements but param has {p.numel}")
    td_code = td_factor_code(td_factor)
    n_rows = rows_of(getattr(param, "shape", ())) if rows is None else int(rows)
    if not 0 <= n_rows < _UINT64_LIMIT:
        raise ValueError(f"rows = {rows}: must be in [0, 2**64)")
    v = None
    if exp_avg_sq is None:
        if buffer_mode in (1, 2):
            raise ValueError(f"exp_avg_sq is required (buffer_mode = {buffer_mode})")
    else:
        v = describe_buffer(exp_avg_sq, "exp_avg_sq", frozenset({DTYPE_F32}), writable=True)
        # 0: an unknown mode or rows that do not divide N, which the C library names.
        expected = _native.exp_avg_sq_length(p.numel, n_rows, int(buffer_mode), td_code)
        if p.numel and expected and v.numel != expected:
            what = "CLM" if buffer_mode == 2 else f"TD-CLM with td_factor={td_factor!r}"
            raise ValueError(f"exp_avg_sq has {v.numel} elements but {what} needs {expected} "
                             f"(N = {p.numel}, rows = {n_rows})")
        buffers.append(v)
    w = None
    if master is not None:
        w = describe_buffer(master, "master", frozenset({DTYPE_F32}), writable=True)
        if w.numel != p.numel:
            raise ValueError(f"master has {w.numel} elements but param has {p.numel}")
        buffers.append(w)
    devices = {b.device_label for b in buffers}
    if len(devices) > 1:
        raise ValueError("all buffers must be on one device, got "
                         + ", ".join(f"{b.name} on {b.device_label}" for b in buffers))
    check_no_overlap(buffers)
    seed_int = int(seed)
    if not 0 <= seed_int < _UINT64_LIMIT:
        raise ValueError(f"seed = {seed}: must be in [0, 2**64)")
    hp = make_hyperparams(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                          tau=tau, lam=lam, buffer_mode=buffer_mode, cautious=cautious,
                          bound_mode=bound_mode, bound_ratio=bound_ratio, step=step,
                          check_finite=check_finite, stochastic_rounding=stochastic_rounding,
                          grad_scale=grad_scale)
    desc = _native.TensorDesc(p.ptr, g.ptr, m.ptr, v.ptr if v else 0, w.ptr if w else 0, p.numel,
                              0, seed_int, p.dtype, g.dtype, n_rows, td_code)
    stream = cuda_stream_handle(p.device_index) if p.device_type == _native.DEVICE_CUDA else 0
    options = run_options(p.device_type, p.device_index, backend, stream)
    status, message = _native.step_multi(hp, [desc], options)
    raise_for_status(status, message)


# ---- introspection --------------------------------------------------------------


def backends() -> list[tuple[str, bool, str]]:
    """[(name, available, why not)] for every backend compiled into libluminav."""
    return [tuple(b) for b in _native.backends()]


def last_backend() -> str:
    """The backend (and SIMD target) that ran this thread's last successful step."""
    return _native.last_backend()

