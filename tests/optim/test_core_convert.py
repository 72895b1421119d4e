"""f32 <-> bf16/f16 conversions of src/optim/core: exhaustive, ties, subnormals and stochastic rounding."""
from __future__ import annotations

import numpy as np
import pytest

from luminamoon import _native
from luminav_reference import BF16, F16, bf16_rne_bits, bf16_stochastic_bits, f16_stochastic_bits

ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def f32_bits(values) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=np.float32).view(np.uint32))


def _is_nan16(bits: np.ndarray, kind: str) -> np.ndarray:
    exp_mask, man_mask = (0x7F80, 0x007F) if kind == "bf16" else (0x7C00, 0x03FF)
    return ((bits & exp_mask) == exp_mask) & ((bits & man_mask) != 0)


def _probe_inputs(kind: str, rng) -> np.ndarray:
    """fp32 inputs around every 16-bit value: the value, exact ties, and one fp32 ulp either side."""
    grid = BF16 if kind == "bf16" else F16
    v = grid.values.astype(np.float32)
    lo, hi = grid.values[:-1], grid.values[1:]
    mid = ((lo + hi) / 2).astype(np.float32)  # exact in fp32: ties
    assert np.array_equal(mid.astype(np.float64), (lo + hi) / 2)
    around = [np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
              np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))]
    special = np.array([0.0, -0.0, np.inf, -np.inf, 65504.0, 65519.996, 65520.0, 65536.0, 1e38,
                        3.3895314e38, 3.3961776e38, 3.4028235e38, 1e-45, -1e-45, 1.1754942e-38,
                        2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -26, -(2.0 ** -25)],
                       dtype=np.float32)
    random_bits = rng.integers(0, 1 << 32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out = np.concatenate([v, mid, *around, special, random_bits]).astype(np.float32)
    return out[~np.isnan(out)]


# ---- exact widening: every 16-bit pattern ---------------------------------------------


def test_bf16_to_f32_exhaustive():
    got = _native._core_bf16_to_f32(ALL16)
    np.testing.assert_array_equal(got, ALL16.astype(np.uint32) << 16)


def test_f16_to_f32_exhaustive_against_numpy():
    got = _native._core_f16_to_f32(ALL16)
    want = ALL16.view(np.float16).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["bf16", "f16"])
def test_every_16bit_pattern_round_trips_through_f32(kind):
    widen = _native._core_bf16_to_f32 if kind == "bf16" else _native._core_f16_to_f32
    narrow = _native._core_f32_to_bf16_rne if kind == "bf16" else _native._core_f32_to_f16_rne
    back = narrow(widen(ALL16))
    nan = _is_nan16(ALL16, kind)
    np.testing.assert_array_equal(back[~nan], ALL16[~nan])
    # NaNs stay NaN, keep their sign and come back quiet (signalling ones are quieted).
    quiet = 0x0040 if kind == "bf16" else 0x0200
    assert np.all(_is_nan16(back[nan], kind))
    assert np.all((back[nan] & 0x8000) == (ALL16[nan] & 0x8000))
    assert np.all(back[nan] & quiet)
    already_quiet = nan & ((ALL16 & quiet) != 0)
    np.testing.assert_array_equal(back[already_quiet], ALL16[already_quiet])


# ---- round to nearest even --------------------------------------------------------------


def test_f32_to_bf16_rne_against_independent_grid_rounding(rng):
    x = _probe_inputs("bf16", rng)
    got = _native._core_f32_to_bf16_rne(f32_bits(x))
    want = bf16_rne_bits(x)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_f32_to_f16_rne_against_numpy(rng):
    x = _probe_inputs("f16", rng)
    got = _native._core_f32_to_f16_rne(f32_bits(x))
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)  # NumPy rounds to nearest even
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("kind", ["bf16", "f16"])
def test_rne_nan_inputs_stay_quiet_nans_with_sign(kind, rng):
    payloads = rng.integers(1, 1 << 23, 1000).astype(np.uint32)
    signs = rng.integers(0, 2, 1000).astype(np.uint32) << 31
    bits = np.ascontiguousarray(signs | 0x7F800000 | payloads, dtype=np.uint32)
    narrow = _native._core_f32_to_bf16_rne if kind == "bf16" else _native._core_f32_to_f16_rne
    out = narrow(bits)
    quiet = 0x0040 if kind == "bf16" else 0x0200
    assert np.all(_is_nan16(out, kind)) and np.all(out & quiet)
    np.testing.assert_array_equal(out & 0x8000, (bits >> 16) & 0x8000)


# Hand-derived known answers (ties go to the even neighbour; subnormals kept).
BF16_KNOWN = [
    (1.0 + 2.0 ** -8, 0x3F80),          # tie between 1 and 1+2^-7: even is 1.0
    (1.0 + 3 * 2.0 ** -8, 0x3F82),      # tie between 1+2^-7 (odd) and 1+2^-6: up
    (-(1.0 + 2.0 ** -8), 0xBF80),
    (1.0 + 2.0 ** -8 + 2.0 ** -23, 0x3F81),  # just above the tie: up
    (2.0 ** -133, 0x0001),              # smallest bf16 subnormal
    (3 * 2.0 ** -134, 0x0002),          # tie between subnormals 1 (odd) and 2: up
    (2.0 ** -134, 0x0000),              # tie between 0 and the smallest subnormal: to 0
    (3.3961776e38, 0x7F80),             # above max + ulp/2: Inf
    (3.3895314e38, 0x7F7F),             # max bf16
]
F16_KNOWN = [
    (1.0 + 2.0 ** -11, 0x3C00),         # tie: even is 1.0
    (1.0 + 3 * 2.0 ** -11, 0x3C02),
    (65504.0, 0x7BFF),
    (65519.99, 0x7BFF),                 # below max + ulp/2
    (65520.0, 0x7C00),                  # tie between max (odd) and 2^16: overflows to Inf
    (2.0 ** -24, 0x0001),               # smallest subnormal
    (2.0 ** -25, 0x0000),               # tie with 0: even is 0
    (3 * 2.0 ** -25, 0x0002),           # tie between 1 (odd) and 2 (even): up
    (-(2.0 ** -25) * 1.5, 0x8001),
    (2.0 ** -14 - 2.0 ** -25, 0x0400),  # tie between largest subnormal (odd) and min normal
]


@pytest.mark.parametrize("value,bits", BF16_KNOWN)
def test_bf16_rne_known_answers(value, bits):
    assert int(_native._core_f32_to_bf16_rne(f32_bits([value]))[0]) == bits


@pytest.mark.parametrize("value,bits", F16_KNOWN)
def test_f16_rne_known_answers(value, bits):
    assert int(_native._core_f32_to_f16_rne(f32_bits([value]))[0]) == bits


# ---- stochastic rounding ----------------------------------------------------------------


def _sr_inputs(rng) -> np.ndarray:
    n = 200_000
    wide = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f16_range = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 11, n))).astype(np.float32)
    edges = np.array([65503.0, 65504.0, 65505.0, 65519.0, 65520.0, 70000.0, 3.3895314e38,
                      3.39e38, 3.4028235e38, np.inf, -np.inf, 0.0, -0.0, 1e-45, 2.0 ** -24 * 0.5],
                     dtype=np.float32)
    x = np.concatenate([wide, f16_range, edges, -edges])
    return x[~np.isnan(x)]


@pytest.mark.parametrize("kind", ["bf16", "f16"])
def test_stochastic_rounding_follows_the_bit_recipe(kind, rng):
    x = _sr_inputs(rng)
    r = rng.integers(0, 1 << 32, x.size, dtype=np.uint64).astype(np.uint32)
    # the extreme random words too: r = 0 and r = 2^32 - 1
    r[:1000] = 0
    r[1000:2000] = 0xFFFFFFFF
    if kind == "bf16":
        got = _native._core_f32_to_bf16_stochastic(f32_bits(x), r)
        want = bf16_stochastic_bits(x, r)
    else:
        got = _native._core_f32_to_f16_stochastic(f32_bits(x), r)
        want = f16_stochastic_bits(x, r)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[i]), int(r[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("kind", ["bf16", "f16"])
@pytest.mark.parametrize("value", [1.0 + 0.3 * 2.0 ** -7, -3.0 - 0.77 * 2.0 ** -6, 0.1, 5e-6, 1000.7])
def test_stochastic_rounding_is_unbiased(kind, value):
    # Bits from the spec's hash at consecutive indices, as a real step uses them.
    n = 400_000
    x = np.float32(value)
    grid = BF16 if kind == "bf16" else F16
    lo, hi = float(grid.floor(float(x))), float(grid.ceil(float(x)))
    assert lo < float(x) < hi
    r = _native._core_rounding_bits(np.full(n, 99, np.uint64), np.full(n, 3, np.uint64),
                                    np.arange(n, dtype=np.uint64))
    if kind == "bf16":
        out = _native._core_f32_to_bf16_stochastic(f32_bits(np.full(n, x)), r)
    else:
        out = _native._core_f32_to_f16_stochastic(f32_bits(np.full(n, x)), r)
    values = grid.to_f64(out)
    assert set(np.unique(values)) <= {lo, hi}
    # E[out] = x up to the quantisation of the random word (2^-16 ulp for bf16,
    # 2^-32 ulp and the fp32 fraction for f16); the sampling error of the mean
    # is ulp * sqrt(f (1-f) / n): allow 5 standard deviations.
    ulp = hi - lo
    f = (float(x) - lo) / ulp
    sigma = ulp * np.sqrt(f * (1 - f) / n)
    quantisation = ulp * (2.0 ** -16 if kind == "bf16" else 1e-6)
    assert abs(values.mean() - float(x)) <= 5 * sigma + quantisation, (values.mean(), float(x), sigma)
