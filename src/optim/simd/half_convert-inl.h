// Vectorized f32 <-> bf16/f16 conversions, bit-identical to core/half_convert.h.
//
// Per-target header (Highway's toggle guard): included once per target from a
// file that includes hwy/foreach_target.h. Every function mirrors the scalar
// function of the same name in core/half_convert.h branch for branch, with
// the branches as lane selects; half_convert_simd_test.cc proves them equal
// (all 65536 inputs for the 16 -> 32 bit direction, and for every f32 class
// and rounding boundary in the other, on every compiled target).
// 16-bit values travel in the low half of uint32 lanes ("bits" vectors) so
// that one float vector and its 16-bit counterpart have the same lane count.

#if defined(LUMINAV_SIMD_HALF_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LUMINAV_SIMD_HALF_CONVERT_INL_H_
#undef LUMINAV_SIMD_HALF_CONVERT_INL_H_
#else
#define LUMINAV_SIMD_HALF_CONVERT_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
using BitsOf = hn::Vec<hn::RebindToUnsigned<D>>;  // uint32 lanes of a float vector

// ---- loads and stores of 16-bit lanes --------------------------------------

template <class D>
HWY_INLINE BitsOf<D> load_u16_as_u32(D d, const uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint16_t, D> du16;
  return hn::PromoteTo(du, hn::LoadU(du16, p));
}

// Lanes must hold values <= 0xFFFF (the conversions below guarantee it).
template <class D>
HWY_INLINE void store_u32_as_u16(D d, BitsOf<D> bits, uint16_t* p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> du16;
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, bits)), du16, p);
}

// ---- bf16 ---------------------------------------------------------------------

template <class D>
HWY_INLINE hn::Vec<D> bf16_to_f32(D d, BitsOf<D> h) {
  return hn::BitCast(d, hn::ShiftLeft<16>(h));
}

template <class D>
HWY_INLINE BitsOf<D> f32_to_bf16_rne(D d, hn::Vec<D> x) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const BitsOf<D> u = hn::BitCast(du, x);
  // |x| bits compare as signed: they are below 2^31.
  const auto magnitude = hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(magnitude, hn::Set(di, 0x7f800000)));
  const BitsOf<D> quiet_nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x0040u));
  const BitsOf<D> lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const BitsOf<D> rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)));
  return hn::IfThenElse(is_nan, quiet_nan, rounded);
}

// r: the 32 random bits of each lane (stochastic_hash-inl.h).
template <class D>
HWY_INLINE BitsOf<D> f32_to_bf16_stochastic(D d, hn::Vec<D> x, BitsOf<D> r) {
  const hn::RebindToUnsigned<D> du;
  const BitsOf<D> u = hn::BitCast(du, x);
  const BitsOf<D> nearest = f32_to_bf16_rne(d, x);
  const auto exponent_all_ones =
      hn::Eq(hn::And(u, hn::Set(du, 0x7f800000u)), hn::Set(du, 0x7f800000u));
  const auto nearest_is_inf = hn::Eq(hn::And(nearest, hn::Set(du, 0x7fffu)), hn::Set(du, 0x7f80u));
  const BitsOf<D> h = hn::ShiftRight<16>(hn::Add(u, hn::And(r, hn::Set(du, 0xffffu))));
  const auto carried_to_inf = hn::Eq(hn::And(h, hn::Set(du, 0x7fffu)), hn::Set(du, 0x7f80u));
  const auto keep_nearest = hn::Or(exponent_all_ones, hn::Or(nearest_is_inf, carried_to_inf));
  return hn::IfThenElse(keep_nearest, nearest, h);
}

// ---- f16 ----------------------------------------------------------------------

template <class D>
HWY_INLINE hn::Vec<D> f16_to_f32(D d, BitsOf<D> h) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const BitsOf<D> sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const BitsOf<D> magnitude = hn::And(h, hn::Set(du, 0x7fffu));
  const BitsOf<D> exponent = hn::And(h, hn::Set(du, 0x7c00u));
  const BitsOf<D> mantissa = hn::And(h, hn::Set(du, 0x03ffu));
  // Normal: rebias the exponent by 127 - 15 = 112.
  const BitsOf<D> normal = hn::Add(hn::ShiftLeft<13>(magnitude), hn::Set(du, 112u << 23));
  // Subnormal: m * 2^-24, exact in fp32 (m < 2^10) and a normal fp32 result,
  // so flush-to-zero modes cannot touch it.
  const BitsOf<D> subnormal = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(d, hn::BitCast(di, mantissa)), hn::Set(d, 0x1p-24f)));
  const BitsOf<D> inf_nan = hn::Or(hn::ShiftLeft<13>(magnitude), hn::Set(du, 0x7f800000u));
  const BitsOf<D> bits =
      hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), subnormal,
                     hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x7c00u)), inf_nan, normal));
  return hn::BitCast(d, hn::Or(bits, sign));
}

template <class D>
HWY_INLINE BitsOf<D> f32_to_f16_rne(D d, hn::Vec<D> x) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const BitsOf<D> u = hn::BitCast(du, x);
  const BitsOf<D> sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
  const BitsOf<D> a = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto a_signed = hn::BitCast(di, a);  // < 2^31: signed compares are exact
  const auto is_nan = hn::RebindMask(du, hn::Gt(a_signed, hn::Set(di, 0x7f800000)));
  const auto overflows = hn::RebindMask(du, hn::Gt(a_signed, hn::Set(di, 0x477ff000 - 1)));
  const auto is_normal = hn::RebindMask(du, hn::Gt(a_signed, hn::Set(di, 0x38800000 - 1)));
  const BitsOf<D> quiet_nan =
      hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(a), hn::Set(du, 0x3ffu)));
  const BitsOf<D> rebiased = hn::Sub(a, hn::Set(du, 0x38000000u));
  const BitsOf<D> lsb = hn::And(hn::ShiftRight<13>(rebiased), hn::Set(du, 1u));
  const BitsOf<D> normal =
      hn::ShiftRight<13>(hn::Add(rebiased, hn::Add(hn::Set(du, 0xfffu), lsb)));
  // Subnormal f16 (|x| < 2^-14): |x| + 0.5 lands in [0.5, 1), whose fp32 ulp
  // is 2^-24, the f16 subnormal step; the fp32 addition rounds to nearest
  // even, so the low bits are round(|x| / 2^-24) (f32 subnormals give 0, as
  // the scalar code says).
  const BitsOf<D> subnormal = hn::Sub(
      hn::BitCast(du, hn::Add(hn::BitCast(d, a), hn::Set(d, 0.5f))), hn::Set(du, 0x3f000000u));
  const BitsOf<D> magnitude = hn::IfThenElse(
      is_nan, quiet_nan,
      hn::IfThenElse(overflows, hn::Set(du, 0x7c00u),
                     hn::IfThenElse(is_normal, normal, subnormal)));
  return hn::Or(magnitude, sign);
}

template <class D>
HWY_INLINE BitsOf<D> f32_to_f16_stochastic(D d, hn::Vec<D> x, BitsOf<D> r) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const BitsOf<D> a = hn::And(hn::BitCast(du, x), hn::Set(du, 0x7fffffffu));
  const auto as_rne = hn::RebindMask(du, hn::Gt(hn::BitCast(di, a), hn::Set(di, 0x477fe000 - 1)));
  const BitsOf<D> nearest = f32_to_f16_rne(d, x);
  const hn::Vec<D> abs_x = hn::BitCast(d, a);
  const BitsOf<D> magnitude_mask = hn::Set(du, 0x7fffu);
  const hn::Vec<D> abs_nearest = f16_to_f32(d, hn::And(nearest, magnitude_mask));
  // f16 magnitudes are monotonic in their bits: step one code down or up.
  // (When |nearest| == |x| the fraction below is 0 and lo == nearest wins.)
  const auto nearest_above = hn::RebindMask(du, hn::Gt(abs_nearest, abs_x));
  const BitsOf<D> lo = hn::IfThenElse(nearest_above, hn::Sub(nearest, hn::Set(du, 1u)), nearest);
  const BitsOf<D> hi = hn::Add(lo, hn::Set(du, 1u));
  const hn::Vec<D> abs_lo = f16_to_f32(d, hn::And(lo, magnitude_mask));
  const hn::Vec<D> abs_hi = f16_to_f32(d, hn::And(hi, magnitude_mask));
  const hn::Vec<D> fraction = hn::Div(hn::Sub(abs_x, abs_lo), hn::Sub(abs_hi, abs_lo));
  // Note [exact threshold] (core/half_convert.h): hi iff r < ceil(f * 2^32),
  // decided here in signed 32-bit lanes: with rs = r - 2^31, the condition
  // is rs < ceil(f * 2^32) - 2^31, and that threshold is formed exactly as
  // ceil((f - 1/2) * 2^32) when f >= 1/2 (f - 1/2 is then exact) or as
  // ceil(f * 2^32) - 2^31 in integers when f < 1/2. f >= 1 means hi always.
  const hn::Vec<D> half = hn::Set(d, 0.5f);
  const hn::Vec<D> two_pow_32 = hn::Set(d, 4294967296.0f);
  const auto upper_half = hn::Ge(fraction, half);
  const auto thr_upper = hn::ConvertTo(di, hn::Ceil(hn::Mul(hn::Sub(fraction, half), two_pow_32)));
  const auto thr_lower = hn::Xor(
      hn::ConvertTo(di, hn::Ceil(hn::Mul(hn::IfThenZeroElse(upper_half, fraction), two_pow_32))),
      hn::Set(di, static_cast<int32_t>(0x80000000u)));
  const auto threshold = hn::IfThenElse(hn::RebindMask(di, upper_half), thr_upper, thr_lower);
  const auto r_shifted = hn::BitCast(di, hn::Xor(r, hn::Set(du, 0x80000000u)));
  const auto round_up = hn::Or(hn::RebindMask(du, hn::Lt(r_shifted, threshold)),
                               hn::RebindMask(du, hn::Ge(fraction, hn::Set(d, 1.0f))));
  return hn::IfThenElse(as_rne, nearest, hn::IfThenElse(round_up, hi, lo));
}

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // LUMINAV_SIMD_HALF_CONVERT_INL_H_
