"""luminamoon.optim.step's two routes to a buffer: NumPy arrays read natively through the buffer
protocol, anything else (torch tensors) through functional.describe_buffer. Both must give the
float64 reference's update, bit-identical to each other, with the same shapes and dtypes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from luminamoon import optim
from luminav_reference import Hyper, assert_within_forward_error, reference_step

HP = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)
T = 5


def state(rng, shape, second_length=None):
    n = int(np.prod(shape))
    x = np.asarray(rng.standard_normal(shape) * 0.5, dtype=np.float32)  # 0-D stays an array
    g = np.asarray(rng.standard_normal(shape) * 0.01, dtype=np.float32)
    m = (rng.standard_normal(n) * 0.01).astype(np.float32)
    v = ((rng.random(second_length or n) + 0.05) * 1e-4).astype(np.float32)
    return x, g, m, v


def as_torch(*arrays):
    return [torch.from_numpy(a.copy()) for a in arrays]


@pytest.mark.parametrize("mode,td_factor,shape", [(2, "factored", (37,)), (2, "factored", (6, 7)),
                                                  (1, "factored", (6, 7)), (1, "row", (6, 7)),
                                                  (1, "tensor", (6, 7)), (2, "factored", ())])
def test_numpy_and_torch_routes_match_the_reference_and_each_other(mode, td_factor, shape, rng):
    rows = shape[0] if shape else 1
    n = int(np.prod(shape))
    length = n if mode == 2 else {"factored": rows + n // rows, "row": rows, "tensor": 1}[td_factor]
    x, g, m, v = state(rng, shape, length)
    xn, gn, mn, vn = (a.copy() for a in (x, g, m, v))
    xt, gt, mt, vt = as_torch(x, g, m, v)
    want = reference_step(Hyper(**{k: HP[k] for k in ("lr", "eps", "weight_decay")}, buffer_mode=mode,
                                td_factor=td_factor), x.ravel(), m, v, g.ravel(), T,
                          rows=rows if mode == 1 else None)
    kwargs = dict(**HP, buffer_mode=mode, td_factor=td_factor, step=T, backend="scalar")
    optim.step(xn, gn, mn, vn, **kwargs)  # rows from the array's first dimension
    optim.step(xt, gt, mt, vt, **kwargs)
    assert_within_forward_error("param", xn.ravel(), want.x, want.scale_x)
    assert_within_forward_error("exp_avg", mn, want.m, want.scale_m)
    assert_within_forward_error("exp_avg_sq", vn, want.v, want.scale_v)
    for ours, theirs in ((xn, xt), (mn, mt), (vn, vt)):
        assert ours.tobytes() == theirs.numpy().tobytes()
    assert gn.tobytes() == g.tobytes() and gt.numpy().tobytes() == g.tobytes()


@pytest.mark.parametrize("param_dtype", ["bf16", np.float16])
def test_sixteen_bit_parameters_through_both_routes_give_the_same_bits(param_dtype, rng):
    x32, g, m, v = state(rng, (64,))
    master = x32.copy()
    if param_dtype == "bf16":
        xn = (x32.view(np.uint32) >> 16).astype(np.uint16)  # NumPy bf16: uint16 bit patterns
        xt = torch.from_numpy(xn.copy().view(np.int16)).view(torch.bfloat16)
    else:
        xn = x32.astype(np.float16)
        xt = torch.from_numpy(xn.copy())
    gh = g.astype(np.float16)
    kwargs = dict(**HP, step=T, seed=11, backend="scalar")
    mn, vn, wn = m.copy(), v.copy(), master.copy()
    optim.step(xn, gh, mn, vn, wn, **kwargs)
    mt, vt, wt = as_torch(m, v, master)
    optim.step(xt, torch.from_numpy(gh.copy()), mt, vt, wt, **kwargs)
    assert xn.tobytes() == xt.view(torch.int16).numpy().tobytes()
    assert (mn.tobytes(), vn.tobytes(), wn.tobytes()) == (mt.numpy().tobytes(), vt.numpy().tobytes(),
                                                         wt.numpy().tobytes())
    assert wn.tobytes() != master.tobytes()  # it moved


def test_a_read_only_gradient_and_a_numpy_subclass_are_accepted(rng):
    class Tagged(np.ndarray):
        pass

    x, g, m, v = state(rng, (33,))
    reference = [a.copy() for a in (x, g, m, v)]
    optim.step(*reference, **HP, step=T, backend="scalar")
    g.flags.writeable = False  # the gradient is only read
    xs = x.copy().view(Tagged)
    optim.step(xs, g, m, v, **HP, step=T, backend="scalar")
    assert [np.asarray(xs).tobytes(), m.tobytes(), v.tobytes()] == [a.tobytes() for a in
                                                                  (reference[0], reference[2], reference[3])]


def test_explicit_rows_override_the_first_dimension(rng):
    x, g, m, v = state(rng, (6, 7), second_length=3 + 14)
    before = [a.copy() for a in (x, g, m, v)]
    optim.step(x, g, m, v, **HP, step=T, buffer_mode=1, td_factor="factored", rows=3, backend="scalar")
    want = reference_step(Hyper(lr=HP["lr"], eps=HP["eps"], weight_decay=HP["weight_decay"], buffer_mode=1,
                                td_factor="factored"), before[0].ravel(), before[2], before[3],
                          before[1].ravel(), T, rows=3)
    assert_within_forward_error("exp_avg_sq", v, want.v, want.scale_v)
    with pytest.raises(ValueError, match=r"rows = -1: must be in \[0, 2\*\*64\)"):
        optim.step(x, g, m, v, **HP, step=T, buffer_mode=1, rows=-1, backend="scalar")
    with pytest.raises(ValueError, match="seed = 18446744073709551616"):
        optim.step(x, g, m, v, **HP, step=T, buffer_mode=1, rows=3, seed=1 << 64, backend="scalar")
    with pytest.raises(TypeError, match="backend must be a string, got int"):
        optim.step(x, g, m, v, **HP, step=T, buffer_mode=1, rows=3, backend=3)
    with pytest.raises(ValueError, match="td_factor = 'rows': must be one of factored, row, tensor"):
        optim.step(x, g, m, v, **HP, step=T, buffer_mode=1, td_factor="rows", backend="scalar")
