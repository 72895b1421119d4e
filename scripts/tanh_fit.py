"""The coefficients of the SIMD backend's fp32 tanh (Note [tanh accuracy] in
src/optim/simd/accurate_tanh-inl.h) and a NumPy model of it, swept for its error in fp32 ulp.

tanh(x) = x + x^3 P(x^2) for |x| < 1, P of degree DEG fitted by weighted least squares (tanh's
relative error) at Chebyshev nodes of (0, 1], coefficients rounded to fp32 and evaluated by FMAs
(emulated: the fp32 product is exact in double, then one rounding); 1 - 2 / (exp(2|x|) + 1) above,
|x| clamped to 9.5. The sweep takes every third fp32 pattern of [2^-14, 12).

    python scripts/tanh_fit.py        (about a minute a degree)
"""
import numpy as np

f32 = np.float32


def fit(a, deg):
    x = np.cos(np.linspace(0, np.pi, 4000)) * a / 2 + a / 2
    x = x[x > 1e-4]
    y = x * x
    t = np.tanh(x)
    target = (t - x) / x ** 3  # P(y)
    weight = x ** 3 / t  # P's error relative to tanh
    coeffs, *_ = np.linalg.lstsq(np.vander(y, deg + 1, increasing=True) * weight[:, None], target * weight,
                                 rcond=None)
    return [f32(c) for c in coeffs]


def fma(a, b, c):
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(f32)


def model_tanh(x, coeffs):
    ax = np.abs(x.astype(f32))
    y = (ax * ax).astype(f32)
    p = np.full_like(ax, coeffs[-1])
    for c in coeffs[-2::-1]:
        p = fma(p, y, np.full_like(ax, c))
    near_zero = fma((ax * y).astype(f32), p, ax)
    e = np.exp(np.minimum(f32(2) * ax, f32(19))).astype(f32)
    far = (f32(1) - (f32(2) / (e + f32(1))).astype(f32)).astype(f32)
    return np.copysign(np.where(ax < f32(1), near_zero, far), x).astype(f32)


def ulp_error(got, x):
    exact = np.tanh(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(f32)).astype(np.float64)


for deg in (7, 8, 9):
    coeffs = fit(1.0, deg)
    worst, at = 0.0, None
    lo, hi = f32(2 ** -14).view(np.int32), f32(12).view(np.int32)
    for start in range(lo, hi, 20_000_000):
        x = np.arange(start, min(start + 20_000_000, hi), 3, dtype=np.int32).view(f32)
        err = ulp_error(model_tanh(x, coeffs), x)
        i = int(np.argmax(err))
        if err[i] > worst:
            worst, at = float(err[i]), float(x[i])
    print(f"degree {deg}: max {worst:.3f} ulp at x = {at}")
    print("  P, lowest power first:", ", ".join(f"{float(c):.9e}f" for c in coeffs))
