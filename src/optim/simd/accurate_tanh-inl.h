// fp32 tanh within the spec's 2 ulp on every Highway target (the soft clip).
//
// Per-target header (Highway's toggle guard).
// Note [tanh accuracy]: Highway's own hn::Tanh documents a 4-ulp bound, and
// the spec asks for 2. Here, in fp32 lanes (the whole vector, no widening):
// - |x| < 1: tanh(x) = x + x^3 P(x^2), P of degree 7 fitted to tanh's relative
//   error on (0, 1] (weighted least squares at Chebyshev nodes, coefficients
//   rounded to fp32), evaluated by FMAs: the correction term is at most a
//   third of the result, so its rounding errors shrink by as much;
// - |x| >= 1: 1 - 2 / (exp(2|x|) + 1) with Highway's float Exp (1 ulp): the
//   quotient is at most 0.24, so its relative error moves the result by
//   about a quarter of its own ulps; |x| is clamped to 9.5 first, where
//   tanh rounds to 1 (within 3e-8 of 1 from 9.02 on), so the function
//   saturates and never returns NaN for finite or infinite input.
// accurate_tanh_test.cc measures the result against std::tanh in double:
// every fp32 pattern of [0, 12] (LUMINAV_EXHAUSTIVE_F32=1) gave at most
// 1.164 ulp on the targets with FMA (AVX2, AVX3) and 1.333 ulp on SSE4/SSSE3,
// whose MulAdd rounds twice, both at x just below 1 (scripts/tanh_fit.py's
// model of the same operations: 1.187). The first version widened to double
// (Expm1 and a division in double lanes, 0.5 ulp) and made the CPU step with
// tau 3.7-4.2x slower than without (docs/benchmarks.md, row T2k).

#if defined(LUMINAV_SIMD_ACCURATE_TANH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LUMINAV_SIMD_ACCURATE_TANH_INL_H_
#undef LUMINAV_SIMD_ACCURATE_TANH_INL_H_
#else
#define LUMINAV_SIMD_ACCURATE_TANH_INL_H_
#endif

#include <cmath>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> accurate_tanh(D d, hn::Vec<D> x) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(d, static_cast<float>(std::tanh(static_cast<double>(hn::GetLane(x)))));
#else
  const auto one = hn::Set(d, 1.0f);
  const auto ax = hn::Abs(x);
  const auto y = hn::Mul(ax, ax);
  auto p = hn::Set(d, 1.219369733e-04f);  // P(y), highest power first (Note [tanh accuracy])
  p = hn::MulAdd(p, y, hn::Set(d, -8.431260358e-04f));
  p = hn::MulAdd(p, y, hn::Set(d, 3.082066774e-03f));
  p = hn::MulAdd(p, y, hn::Set(d, -8.598299697e-03f));
  p = hn::MulAdd(p, y, hn::Set(d, 2.178636566e-02f));
  p = hn::MulAdd(p, y, hn::Set(d, -5.395355821e-02f));
  p = hn::MulAdd(p, y, hn::Set(d, 1.333320737e-01f));
  p = hn::MulAdd(p, y, hn::Set(d, -3.333332837e-01f));
  const auto near_zero = hn::MulAdd(hn::Mul(ax, y), p, ax);
  const auto twice = hn::Min(hn::Add(ax, ax), hn::Set(d, 19.0f));  // |x| clamped to 9.5
  const auto e = hn::Exp(d, twice);
  const auto far = hn::Sub(one, hn::Div(hn::Set(d, 2.0f), hn::Add(e, one)));
  return hn::CopySign(hn::IfThenElse(hn::Lt(ax, one), near_zero, far), x);
#endif
}

// Highway's float Tanh, kept callable so the test can measure it too.
template <class D>
HWY_INLINE hn::Vec<D> highway_tanh(D d, hn::Vec<D> x) {
  return hn::Tanh(d, x);
}

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // LUMINAV_SIMD_ACCURATE_TANH_INL_H_
