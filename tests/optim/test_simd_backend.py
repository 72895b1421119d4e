"""The simd backend through the Python API: against the float64 spec reference over every
option combination, bit-identical to the scalar backend where it must be, thread-count
invariant, and really running the backend and Highway target that were forced."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from luminamoon import _native, optim
from luminav_reference import Hyper, exp_avg_sq_length, normwise_relative_error, reference_step
from test_optim_scalar_reference import (COMBOS, IDS, check_step, expected_rounding, hyper, make_param,
                                         param_bits, random_state, rows_for, run_on as run, start_of_step)

N = 1029  # several vectors plus a tail on every Highway target; 21 x 49 for TD-CLM's rows


def simd_available() -> bool:
    return any(name == "simd" and ok for name, ok, _ in optim.backends())


pytestmark = pytest.mark.skipif(not simd_available(), reason="simd backend not built here")


@pytest.mark.parametrize("mode,td,tau,lam,cautious,bound,dtype,use_master", COMBOS, ids=IDS)
def test_one_step_within_forward_error_of_the_spec(mode, td, tau, lam, cautious, bound, dtype, use_master, rng):
    hp = hyper(mode, td, tau, lam, cautious, bound)
    rows = rows_for(hp, N)
    x32, m, v, g = random_state(rng, mode, N, hp, rows)
    param, master, x_old = start_of_step(x32, dtype, use_master)
    ref = reference_step(hp, x_old, m, v, g, 7, rows)
    # The scalar backend on a copy: where no tanh or reduction enters, every
    # lane of the simd backend is the same IEEE arithmetic, bit for bit.
    s_param, s_m, s_v = param.copy(), m.copy(), v.copy()
    s_master = None if master is None else master.copy()
    run("scalar", s_param, g, s_m, s_v, s_master, hp, 7, rows)
    run("simd", param, g, m, v, master, hp, 7, rows)
    check_step(hp, dtype, param, master, m, v, ref, 7)
    if tau == 0.0 and mode == 2 and not cautious and bound != 1:
        np.testing.assert_array_equal(m.view(np.uint32), s_m.view(np.uint32))
        np.testing.assert_array_equal(v.view(np.uint32), s_v.view(np.uint32))
        np.testing.assert_array_equal(param.view(np.uint16), s_param.view(np.uint16))
    if master is not None and dtype != "f32":
        same = master.view(np.uint32) == s_master.view(np.uint32)
        assert same.mean() > 0.9
        np.testing.assert_array_equal(param_bits(param, dtype)[same], param_bits(s_param, dtype)[same])


@pytest.mark.parametrize("mode,td,cautious,bound,dtype,use_master", [
    (2, "tensor", False, 0, "f32", False), (1, "tensor", True, 1, "f32", False),
    (2, "tensor", True, 2, "bf16", True), (1, "tensor", False, 1, "f16", True),
    (1, "tensor", True, 0, "bf16", True), (1, "factored", False, 0, "f32", False),
    (1, "factored", True, 1, "bf16", True), (1, "factored", True, 2, "f16", True),
    (1, "row", False, 0, "f32", False), (1, "row", True, 1, "bf16", True)])
def test_hundred_steps_within_normwise_error(mode, td, cautious, bound, dtype, use_master, rng):
    hundred_steps_within_normwise_error("simd", mode, td, cautious, bound, dtype, use_master, rng)


def hundred_steps_within_normwise_error(backend, mode, td, cautious, bound, dtype, use_master, rng):
    """100 steps of `backend` against the float64 reference (each step from the fp32-rounded
    state): moments and weights within 1e-5 normwise, masters' SR bits as the spec's hash gives."""
    hp = hyper(mode, td, 0.5, 0.3, cautious, bound)
    rows = rows_for(hp, N)
    x32 = (rng.standard_normal(N) * 0.5).astype(np.float32)
    param = make_param(x32, dtype)
    master = x32.copy() if use_master else None
    m = np.zeros(N, np.float32)
    v = np.zeros(exp_avg_sq_length(N, rows or N, hp), np.float32)
    x_ref, m_ref, v_ref = x32.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    mean_grad = rng.standard_normal(N) * 0.01
    for t in range(1, 101):
        g = (mean_grad + rng.standard_normal(N) * 0.01).astype(np.float32)
        ref = reference_step(hp, x_ref, m_ref, v_ref, g, t, rows)
        run(backend, param, g, m, v, master, hp, t, rows)
        x_ref, m_ref, v_ref = (a.astype(np.float32).astype(np.float64) for a in (ref.x, ref.m, ref.v))
    assert normwise_relative_error(m, m_ref) <= 1e-5
    assert normwise_relative_error(v, v_ref) <= 1e-5
    if use_master:
        assert normwise_relative_error(master, x_ref) <= 1e-5
        np.testing.assert_array_equal(param_bits(param, dtype), expected_rounding(master, dtype, 100, True))
    else:
        assert normwise_relative_error(param, x_ref) <= 1e-5


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 63, 65])
def test_short_and_empty_tensors_match_scalar_bit_for_bit(n, rng):
    hp = Hyper(lr=1e-2, weight_decay=0.1)
    x32, m, v, g = random_state(rng, 2, n)
    out = {}
    for backend in ("scalar", "simd"):
        p, mm, vv = x32.copy(), m.copy(), v.copy()
        run(backend, p, g, mm, vv, None, hp, 2)
        out[backend] = (p, mm, vv)
    for a, b in zip(out["scalar"], out["simd"]):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_thread_counts_1_2_7_give_identical_bits(rng):
    # 2^21 + 3 elements: two reduction chunks and a tail; every reduction on.
    n = (1 << 21) + 3
    hp = Hyper(lr=1e-2, weight_decay=0.1, buffer_mode=1, cautious=True, bound_mode=1,
               bound_ratio=1e-3, tau=0.3, td_factor="tensor")
    x32, m, v, g = random_state(rng, 1, n)
    param0 = make_param(x32, "bf16")

    def one_step():
        p, mm, vv, w = param0.copy(), m.copy(), v.copy(), x32.copy()
        run("simd", p, g, mm, vv, w, hp, 3)
        return p, mm, vv, w
    assert_same_bits_at_thread_counts((1, 2, 7), one_step)


def assert_same_bits_at_thread_counts(counts, one_step) -> None:
    """one_step() -> arrays, run at each thread count: the same bits every time."""
    results = []
    saved = _native.get_num_threads()
    try:
        for threads in counts:
            _native.set_num_threads(threads)
            assert _native.get_num_threads() == threads
            results.append(one_step())
    finally:
        _native.set_num_threads(saved)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def _in_fresh_process(code: str, **env) -> str:
    full_env = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


STEP_AND_REPORT = """
import numpy as np
from luminamoon import optim
x = np.ones(40, np.float32); g = np.full(40, 0.1, np.float32)
m = np.zeros(40, np.float32); v = np.zeros(40, np.float32)
try:
    optim.step(x, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1,
               backend={backend!r})
    print(optim.last_backend())
except optim.LuminaVError as e:
    print("ERROR", type(e).__name__, e)
"""


def _compiled_and_supported_targets() -> list[str]:
    """The Highway targets the library names when refusing an unknown one."""
    out = _in_fresh_process(STEP_AND_REPORT.format(backend="simd"), LUMINAV_SIMD_TARGET="AVX9000")
    return out.rpartition("(available: ")[2].rstrip(")").split(",")


def test_forced_highway_target_really_runs():
    targets = _compiled_and_supported_targets()
    features = _native.cpu_features().split(",")
    # x86-64 builds compile AVX2 and SSE4 kernels (and AVX3, AVX3_DL): every one this CPU
    # runs must be listed.
    for target, feature in (("AVX2", "avx2"), ("SSE4", "sse4.2"), ("AVX3", "avx512bw")):
        if feature in features:
            assert target in targets, targets
    for target in targets:
        label = _in_fresh_process(STEP_AND_REPORT.format(backend="simd"), LUMINAV_SIMD_TARGET=target)
        assert label == f"simd:{target}"


def test_unknown_highway_target_is_refused_with_the_choices():
    out = _in_fresh_process(STEP_AND_REPORT.format(backend="simd"), LUMINAV_SIMD_TARGET="AVX9000")
    assert out.startswith("ERROR BackendUnavailableError")
    assert "LUMINAV_SIMD_TARGET=AVX9000" in out and "available:" in out


def test_force_backend_environment_selects_simd():
    label = _in_fresh_process(STEP_AND_REPORT.format(backend="auto"), LUMINAV_FORCE_BACKEND="simd")
    assert label.startswith("simd:")
    label = _in_fresh_process(STEP_AND_REPORT.format(backend="auto"), LUMINAV_FORCE_BACKEND="scalar")
    assert label == "scalar"
