"""TD-CLM version 2 (spec "TD-CLM second moment") and the gradient scale on the CPU backends:
tensors of every rank and odd shape against the float64 reference, R = 1 and C = 1, the
C = 1 case equal to CLM, thread-count invariance bit for bit, and scaled gradients."""
from __future__ import annotations

import numpy as np
import pytest

from luminamoon import optim
from luminav_reference import (Hyper, accuracy_factor, assert_within_forward_error, exp_avg_sq_length,
                               normwise_relative_error, reference_step)
from test_optim_scalar_reference import SEED, check_parameter, expected_rounding, make_param, param_bits
from test_simd_backend import assert_same_bits_at_thread_counts

BACKENDS = [b for b in ("scalar", "simd") if any(n == b and ok for n, ok, _ in optim.backends())]
# 1-D, 2-D (odd, R = 1, C = 1), 4-D (R = 3, C = 120), 0-D-like 1 x 1.
SHAPES = [(1000,), (7, 13), (1, 1000), (1000, 1), (3, 4, 5, 6), (1, 1), (33, 64)]
BASE = Hyper(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, buffer_mode=1)


def state(rng, shape, hp: Hyper):
    n = int(np.prod(shape))
    x32 = (rng.standard_normal(shape) * 0.5).astype(np.float32)
    m = (rng.standard_normal(shape) * 0.01).astype(np.float32)
    v = ((rng.random(exp_avg_sq_length(n, shape[0], hp)) + 0.05) * 1e-4).astype(np.float32)
    # Rows and columns of different gradient scales, so that the factors differ.
    scale = np.outer(rng.random(shape[0]) + 0.2, rng.random(n // shape[0]) + 0.2).reshape(shape)
    g = (rng.standard_normal(shape) * 0.01 * scale + 0.002).astype(np.float32)
    return x32, m, v, g


def step(backend, param, g, m, v, master, hp: Hyper, t, **extra):
    optim.step(param, g, m, v, master, **hp.kwargs(), step=t, seed=SEED, backend=backend, **extra)
    assert optim.last_backend().split(":")[0] == backend


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("td", ["factored", "row"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_one_step_of_every_shape_within_the_bound(backend, td, shape, dtype, rng):
    hp = BASE.with_(td_factor=td, lam=0.2, cautious=True)
    x32, m, v, g = state(rng, shape, hp)
    param = make_param(x32.reshape(-1), dtype).reshape(shape)  # R from the shape
    master = x32.copy()
    ref = reference_step(hp, x32.reshape(-1), m.reshape(-1), v, g.reshape(-1), 5, shape[0])
    step(backend, param, g, m, v, master, hp, 5)
    factor = accuracy_factor(hp)
    assert_within_forward_error("exp_avg", m.reshape(-1), ref.m, ref.scale_m, factor)
    assert_within_forward_error("exp_avg_sq", v, ref.v, ref.scale_v)
    check_parameter(dtype, param.reshape(-1), master.reshape(-1), ref, 5, factor=factor)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("td,shape,dtype", [
    ("factored", (33, 64), "f32"), ("factored", (7, 13), "bf16"), ("factored", (1, 1000), "f16"),
    ("factored", (3, 4, 5, 6), "f32"), ("row", (33, 64), "bf16"), ("row", (1000, 1), "f32")])
def test_hundred_steps_within_normwise_error(backend, td, shape, dtype, rng):
    hp = BASE.with_(td_factor=td, tau=0.5)
    n = int(np.prod(shape))
    x32 = (rng.standard_normal(n) * 0.5).astype(np.float32)
    param = make_param(x32, dtype).reshape(shape)
    master = x32.copy().reshape(shape)
    m = np.zeros(shape, np.float32)
    v = np.zeros(exp_avg_sq_length(n, shape[0], hp), np.float32)
    x_ref, m_ref, v_ref = x32.astype(np.float64), m.reshape(-1).astype(np.float64), v.astype(np.float64)
    mean_grad = rng.standard_normal(n) * 0.01
    for t in range(1, 101):
        g = (mean_grad + rng.standard_normal(n) * 0.01).astype(np.float32)
        ref = reference_step(hp, x_ref, m_ref, v_ref, g, t, shape[0])
        step(backend, param, g.reshape(shape), m, v, master, hp, t)
        x_ref, m_ref, v_ref = (a.astype(np.float32).astype(np.float64) for a in (ref.x, ref.m, ref.v))
    assert normwise_relative_error(m.reshape(-1), m_ref) <= 1e-5
    assert normwise_relative_error(v, v_ref) <= 1e-5
    assert normwise_relative_error(master.reshape(-1), x_ref) <= 1e-5
    if dtype != "f32":
        np.testing.assert_array_equal(param_bits(param.reshape(-1), dtype),
                                      expected_rounding(master.reshape(-1), dtype, 100, True))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("td", ["factored", "row"])
def test_one_element_per_row_is_clm_bit_for_bit(backend, td, rng):
    # C = 1 (a bias, a norm's weight): the row factor is CLM's v, element by element.
    n = 1029
    x32 = (rng.standard_normal(n) * 0.5).astype(np.float32)
    m = (rng.standard_normal(n) * 0.01).astype(np.float32)
    v = ((rng.random(n) + 0.05) * 1e-4).astype(np.float32)
    g = (rng.standard_normal(n) * 0.01).astype(np.float32)
    out = []
    for hp in (BASE.with_(buffer_mode=2, cautious=True), BASE.with_(td_factor=td, cautious=True)):
        x, mm, vv = x32.copy(), m.copy(), v.copy()
        step(backend, x, g, mm, vv, None, hp, 3)
        out.append((x, mm, vv))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_simd_matches_scalar_within_the_bound_on_a_wide_tensor(rng):
    # 3 x 5000: several column stripes (1024 wide) per row, partial vectors at each row's end.
    if "simd" not in BACKENDS:
        pytest.skip("simd backend not built here")
    hp = BASE.with_(td_factor="factored", cautious=True, bound_mode=1, bound_ratio=1e-3)
    x32, m, v, g = state(rng, (3, 5000), hp)
    ref = reference_step(hp, x32.reshape(-1), m.reshape(-1), v, g.reshape(-1), 2, 3)
    step("simd", x32, g, m, v, None, hp, 2)
    assert_within_forward_error("x", x32.reshape(-1), ref.x, ref.scale_x, accuracy_factor(hp))
    assert_within_forward_error("exp_avg_sq", v, ref.v, ref.scale_v)


@pytest.mark.parametrize("td", ["factored", "row"])
def test_thread_counts_1_2_3_7_give_identical_bits(td, rng):
    if "simd" not in BACKENDS:
        pytest.skip("simd backend not built here")
    # 1500 x 2100: three column stripes and three row blocks of pass 1 (Note [factor
    # sums]), rows of 2100 = 131 vectors + 4; every reduction round on.
    shape = (1500, 2100)
    hp = BASE.with_(td_factor=td, cautious=True, bound_mode=1, bound_ratio=1e-3, tau=0.3)
    x32, m, v, g = state(rng, shape, hp)
    param0 = make_param(x32.reshape(-1), "bf16").reshape(shape)

    def one_step():
        p, mm, vv, w = param0.copy(), m.copy(), v.copy(), x32.copy()
        step("simd", p, g, mm, vv, w, hp, 3)
        return p, mm, vv, w
    assert_same_bits_at_thread_counts((1, 2, 3, 7), one_step)


# ---- the gradient scale (spec "Gradient scale") ----------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode,td", [(2, "tensor"), (1, "factored"), (1, "row"), (1, "tensor")])
def test_a_power_of_two_scale_equals_the_unscaled_gradient_bit_for_bit(backend, mode, td, rng):
    # g * fp32(1/1024) is exact: the scaled step is the step of g/1024.
    hp = BASE.with_(buffer_mode=mode, td_factor=td, lam=0.3)
    shape = (21, 49)
    x32, m, v, g = state(rng, shape, hp)
    out = []
    for grad, sigma in ((g * np.float32(1024.0), 1024.0), (g, 1.0)):
        x, mm, vv = x32.copy(), m.copy(), v.copy()
        step(backend, x, grad, mm, vv, None, hp.with_(grad_scale=sigma), 4)
        out.append((x, mm, vv))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sigma", [3.0, 0.1, 65536.0])
def test_scaled_step_within_the_bound(backend, sigma, rng):
    hp = BASE.with_(td_factor="factored", cautious=True, grad_scale=sigma)
    shape = (21, 49)
    x32, m, v, g = state(rng, shape, hp)
    g = (g * np.float32(sigma)).astype(np.float32)
    ref = reference_step(hp, x32.reshape(-1), m.reshape(-1), v, g.reshape(-1), 6, shape[0])
    step(backend, x32, g, m, v, None, hp, 6)
    assert_within_forward_error("x", x32.reshape(-1), ref.x, ref.scale_x, accuracy_factor(hp))
    assert_within_forward_error("exp_avg_sq", v, ref.v, ref.scale_v)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode,td", [(2, "tensor"), (1, "factored"), (1, "tensor")])
def test_a_gradient_the_scale_makes_infinite_fails_the_finite_check(backend, mode, td, rng):
    hp = BASE.with_(buffer_mode=mode, td_factor=td, grad_scale=1e-30)  # 1/sigma = 1e30
    x32, m, v, g = state(rng, (21, 49), hp)
    g[3, 7] = 1e10  # finite, but 1e40 after the scale
    before = [a.tobytes() for a in (x32, m, v)]
    with pytest.raises(optim.NonFiniteGradientError):
        step(backend, x32, g, m, v, None, hp, 2)
    assert [a.tobytes() for a in (x32, m, v)] == before


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_scale_is_refused_with_its_value(sigma, rng):
    hp = BASE.with_(buffer_mode=2, grad_scale=sigma)
    x32, m, v, g = state(rng, (21, 49), hp)
    with pytest.raises(ValueError, match="grad_scale"):
        step("scalar", x32, g, m, v, None, hp, 2)


def test_front_end_checks_the_layout_and_names(rng):
    hp = BASE.with_(td_factor="factored")
    x32, m, v, g = state(rng, (7, 13), hp)
    with pytest.raises(ValueError, match=r"needs 20 \(N = 91, rows = 7\)"):
        step("scalar", x32, g, m, v[:5], None, hp, 1)
    with pytest.raises(ValueError, match="td_factor"):
        step("scalar", x32, g, m, v, None, hp.with_(td_factor="columns"), 1)
    with pytest.raises(ValueError, match="rows must divide num_elements 91"):
        step("scalar", x32, g, m, v, None, hp, 1, rows=5)
