"""Every error row of the spec through luminamoon.optim.step: the right exception, a message
naming the parameter, and every buffer byte-identical to before the call."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from luminamoon import optim

N = 65
GOOD = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=3)


def buffers(rng, mode=2, param_dtype=np.float32, td_factor="tensor"):
    """1-D buffers: TD-CLM's second moment is the scalar s (tensor) or, factored/row with
    C = 1, one number per element."""
    x = (rng.standard_normal(N) * 0.5).astype(param_dtype)
    g = (rng.standard_normal(N) * 0.01).astype(np.float32)
    m = (rng.standard_normal(N) * 0.01).astype(np.float32)
    one_scalar = mode == 1 and td_factor == "tensor"
    v = np.array([3e-5], np.float32) if one_scalar else (rng.random(N) * 1e-4).astype(np.float32)
    return x, g, m, v


def snapshot(*arrays):
    return [None if a is None else bytes(np.asarray(a).tobytes()) for a in arrays]


# (keyword changes, words the message must contain)
HYPERPARAMETER_ROWS = [
    (dict(lr=-1e-3), ["lr", "-0.001"]),
    (dict(lr=math.inf), ["lr", "inf"]),
    (dict(eps=0.0), ["eps", "0"]),
    (dict(eps=-1e-8), ["eps", "-1e-08"]),
    (dict(beta1=1.0), ["beta1", "1"]),
    (dict(beta1=-0.1), ["beta1", "-0.1"]),
    (dict(beta2=1.0), ["beta2", "1"]),
    (dict(beta2=1.5), ["beta2", "1.5"]),
    (dict(lam=1.5), ["lam", "1.5"]),
    (dict(lam=-0.25), ["lam", "-0.25"]),
    (dict(tau=-0.5), ["tau", "-0.5"]),
    (dict(buffer_mode=3), ["buffer_mode", "3"]),
    (dict(buffer_mode=0), ["buffer_mode", "0"]),
    (dict(bound_mode=7), ["bound_mode", "7"]),
    (dict(bound_mode=1, bound_ratio=0.0), ["bound_ratio", "0"]),
    (dict(bound_mode=2, bound_ratio=-0.1), ["bound_ratio", "-0.1"]),
    (dict(step=0), ["step", "0"]),
    (dict(step=-1), ["step", "-1"]),
    (dict(weight_decay=math.nan), ["weight_decay", "nan"]),
    (dict(lr=math.nan), ["lr", "nan"]),
]


@pytest.mark.parametrize("change,words", HYPERPARAMETER_ROWS, ids=[str(c) for c, _ in HYPERPARAMETER_ROWS])
def test_invalid_hyperparameter_is_refused_and_nothing_is_written(change, words, rng):
    x, g, m, v = buffers(rng)
    before = snapshot(x, g, m, v)
    kwargs = {**GOOD, **change}
    with pytest.raises(ValueError) as info:
        optim.step(x, g, m, v, **kwargs, backend="scalar")
    message = str(info.value).lower()
    for word in words:
        assert word.lower() in message, message
    assert snapshot(x, g, m, v) == before


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("position", [0, N // 2, N - 1])
@pytest.mark.parametrize("mode,td", [(2, "tensor"), (1, "tensor"), (1, "factored")])
@pytest.mark.parametrize("grad_dtype", [np.float32, np.float16, "bf16"])
def test_non_finite_gradient_raises_and_leaves_every_buffer_unchanged(bad, position, mode, td, grad_dtype, rng):
    x, g, m, v = buffers(rng, mode, td_factor=td)
    master = x.copy()
    if grad_dtype == "bf16":
        g = (g.view(np.uint32) >> 16).astype(np.uint16)
        g[position] = np.array([bad], np.float32).view(np.uint32)[0] >> 16
    else:
        g = g.astype(grad_dtype)
        g[position] = bad
    before = snapshot(x, g, m, v, master)
    with pytest.raises(optim.NonFiniteGradientError) as info:
        optim.step(x, g, m, v, master, **GOOD, buffer_mode=mode, cautious=True, bound_mode=1,
                   bound_ratio=0.1, backend="scalar", td_factor=td)
    assert "non-finite" in str(info.value).lower() or "nan" in str(info.value).lower()
    assert isinstance(info.value, ArithmeticError) and not isinstance(info.value, ValueError)
    assert snapshot(x, g, m, v, master) == before


def test_non_finite_gradient_passes_when_the_check_is_off(rng):
    x, g, m, v = buffers(rng)
    g[3] = np.nan
    optim.step(x, g, m, v, **GOOD, check_finite=False, backend="scalar")
    assert np.isnan(x[3]) and np.isfinite(np.delete(x, 3)).all()


def test_empty_tensor_is_a_successful_no_op():
    empty = np.zeros(0, np.float32)
    optim.step(empty, empty.copy(), empty.copy(), empty.copy(), **GOOD, backend="scalar")
    s = np.array([0.25], np.float32)
    optim.step(empty, empty.copy(), empty.copy(), s, **GOOD, buffer_mode=1, backend="scalar",
               td_factor="tensor")
    assert s[0] == np.float32(0.25)  # nothing to do: s untouched


def test_unknown_backend_is_refused(rng):
    x, g, m, v = buffers(rng)
    before = snapshot(x, g, m, v)
    with pytest.raises(ValueError, match="backend 'no-such-backend'"):
        optim.step(x, g, m, v, **GOOD, backend="no-such-backend")
    assert snapshot(x, g, m, v) == before


def test_unavailable_backend_raises_backend_unavailable(rng):
    names = {name: ok for name, ok, _ in optim.backends()}
    missing = next((b for b in ("cuda", "vulkan", "hip") if not names.get(b, False)), None)
    if missing is None:
        pytest.skip("every GPU backend is available here")
    x, g, m, v = buffers(rng)
    before = snapshot(x, g, m, v)
    with pytest.raises(optim.BackendUnavailableError, match=missing):
        optim.step(x, g, m, v, **GOOD, backend=missing)
    assert snapshot(x, g, m, v) == before


# ---- buffers refused by the front end --------------------------------------------------


def _call(x, g, m, v, master=None, **extra):
    optim.step(x, g, m, v, master, **{**GOOD, **extra}, backend="scalar")


def test_missing_second_moment_names_exp_avg_sq(rng):
    x, g, m, _ = buffers(rng)
    with pytest.raises(ValueError, match="exp_avg_sq"):
        _call(x, g, m, None)


@pytest.mark.parametrize("which,replacement,words", [
    ("x", lambda a: a.astype(np.float64), ["param", "float64"]),
    ("g", lambda a: a.astype(np.int32), ["grad", "int32"]),
    ("m", lambda a: a.astype(np.float16), ["exp_avg", "float16"]),
    ("v", lambda a: a.astype(np.float64), ["exp_avg_sq", "float64"]),
    ("x", lambda a: a.astype(">f4"), ["param"]),
    ("x", lambda a: np.repeat(a, 2)[::2], ["param", "contiguous"]),
    ("g", lambda a: a[:-1], ["grad", f"{N - 1}"]),
    ("m", lambda a: np.append(a, 0).astype(np.float32), ["exp_avg", f"{N + 1}"]),
    ("v", lambda a: a[:1].copy(), ["exp_avg_sq", "1"]),
    ("x", lambda a: a.tolist(), ["param", "list"]),
])
def test_bad_buffers_are_refused_before_any_write(which, replacement, words, rng):
    bufs = dict(zip("xgmv", buffers(rng)))
    bufs[which] = replacement(bufs[which])
    before = snapshot(*[b if isinstance(b, np.ndarray) else None for b in bufs.values()])
    with pytest.raises((ValueError, TypeError)) as info:
        _call(bufs["x"], bufs["g"], bufs["m"], bufs["v"])
    for word in words:
        assert word in str(info.value), str(info.value)
    assert snapshot(*[b if isinstance(b, np.ndarray) else None for b in bufs.values()]) == before


def test_read_only_parameter_is_refused(rng):
    x, g, m, v = buffers(rng)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="param.*read-only"):
        _call(x, g, m, v)


def test_tdclm_needs_the_second_moment_of_its_td_factor(rng):
    x, g, m, v = buffers(rng, mode=2)
    before = snapshot(x, g, m, v)
    with pytest.raises(ValueError, match="exp_avg_sq.*TD-CLM with td_factor='tensor' needs 1"):
        _call(x, g, m, v, buffer_mode=1, td_factor="tensor")
    with pytest.raises(ValueError, match=f"exp_avg_sq.*TD-CLM with td_factor='factored' needs {N}"):
        _call(x, g, m, v[:1], buffer_mode=1)  # 1-D: C = 1, one number per element
    assert snapshot(x, g, m, v) == before


@pytest.mark.parametrize("alias", ["param=exp_avg", "param=grad", "exp_avg=exp_avg_sq", "master=param",
                                   "partial"])
def test_overlapping_buffers_are_refused(alias, rng):
    storage = (rng.standard_normal(4 * N) * 0.01).astype(np.float32)
    x, g, m, v = storage[:N], storage[N:2 * N], storage[2 * N:3 * N], storage[3 * N:]
    master = None
    if alias == "param=exp_avg":
        m = x
    elif alias == "param=grad":
        g = x
    elif alias == "exp_avg=exp_avg_sq":
        v = m
    elif alias == "master=param":
        master = x
    else:  # exp_avg starts in the middle of param
        m = storage[N // 2:N // 2 + N]
    before = storage.tobytes()
    with pytest.raises(ValueError, match="overlap"):
        _call(x, g, m, v, master)
    assert storage.tobytes() == before


def test_torch_tensors_on_a_device_without_backend_are_refused(rng):
    x = torch.zeros(N, device="meta")
    with pytest.raises(ValueError, match="meta"):
        _call(x, torch.zeros(N), torch.zeros(N), torch.zeros(N))


def test_mixed_torch_and_numpy_and_bad_torch_layouts(rng):
    x = torch.randn(N)
    before = x.clone()
    g, m, v = (np.asarray(a) for a in buffers(rng)[1:])
    _call(x, g, m, v)  # torch and NumPy buffers mix freely on the CPU
    assert not torch.equal(x, before)
    with pytest.raises(ValueError, match="complex"):
        _call(torch.zeros(N, dtype=torch.complex64), g, m, v)
    with pytest.raises(ValueError, match="sparse|layout"):
        _call(torch.zeros(N).to_sparse(), g, m, v)
    with pytest.raises(ValueError, match="contiguous"):
        _call(torch.zeros(N, 2)[:, 0], g, m, v)


def test_the_native_hooks_are_registered_once_and_a_bad_registration_changes_nothing(rng):
    # functional.py registers its hooks at import (Note [hooks registered once] in
    # src/python/optim_functional_step.cc); a malformed tuple is refused before it replaces them.
    from luminamoon import _native
    for bad in [(), (np.ndarray,) * 4, [None] * 5, "hooks"]:
        with pytest.raises(TypeError, match="5-tuple"):
            _native.set_functional_hooks(bad)
    with pytest.raises(TypeError):  # None is refused by the binding itself
        _native.set_functional_hooks(None)
    x, g, m, v = buffers(rng)
    expected = x.copy()
    _call(x, g, m, v)  # the registered hooks still serve the step
    assert not np.array_equal(x, expected)
    with pytest.raises(ValueError, match="read-only"):  # and the Python describer still names problems
        x.flags.writeable = False
        _call(x, g, m, v)
