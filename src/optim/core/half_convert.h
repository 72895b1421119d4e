// f32 <-> bf16 and f32 <-> f16: round-to-nearest-even and the spec's
// stochastic rounding, bit for bit, on the host and on GPUs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "optim/core/host_device.h"

namespace luminav::core {

LUMINAV_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

LUMINAV_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// ---- bf16 -------------------------------------------------------------------

LUMINAV_HD float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

LUMINAV_HD uint16_t f32_to_bf16_rne(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and payload top, force quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// spec: b' = b + (r & 0xFFFF), upper half of b' (round toward zero of the
// sum). Note [bf16 saturation]: values at or above the largest bf16 plus half
// an ulp become +-Inf exactly as RNE makes them; below that the sum can carry
// into the Inf pattern, and the spec forbids that overflow, so those values
// keep the largest finite bf16 (which is then also RNE's answer).
LUMINAV_HD uint16_t f32_to_bf16_stochastic(float x, uint32_t r) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return f32_to_bf16_rne(x);  // NaN/Inf
  const uint16_t nearest = f32_to_bf16_rne(x);
  if ((nearest & 0x7fffu) == 0x7f80u) return nearest;  // beyond the range: +-Inf
  const uint16_t h = static_cast<uint16_t>((u + (r & 0xffffu)) >> 16);
  if ((h & 0x7fffu) == 0x7f80u) return nearest;  // carry into Inf: largest finite
  return h;
}

// ---- f16 --------------------------------------------------------------------

LUMINAV_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    exponent = 127 - 15 + 1;  // normalise the subnormal m * 2^-24
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    return bits_float(sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13));
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

LUMINAV_HD uint16_t f32_to_f16_rne(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN, quiet, payload top bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 and Inf
  if (a >= 0x38800000u) {  // f16 normal range: rebias the exponent, round the low 13 bits
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  // f16 subnormal (or zero): the result is round(|x| / 2^-24) in the low bits.
  const uint32_t exponent = a >> 23;
  if (exponent == 0) return sign;  // f32 subnormals are far below 2^-25
  const uint32_t shift = 126u - exponent;  // >= 14
  if (shift > 24u) return sign;
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  uint32_t m = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (m & 1u))) ++m;
  return static_cast<uint16_t>(sign | m);
}

// spec: lo = x toward zero, hi = the next f16 away from zero,
// f = (|x| - |lo|) / (|hi| - |lo|) in fp32, result hi iff r * 2^-32 < f.
// Note [exact threshold]: r * 2^-32 < f is read in exact arithmetic (r * 2^-32
// is exact in double but not in fp32). It holds iff r < ceil(f * 2^32), and
// f * 2^32 is exact in fp32, so every backend can decide it with integers.
// The threshold is 64-bit because f may round up to 1.0 (then hi always).
LUMINAV_HD uint64_t f16_round_up_threshold(float fraction) {
  return static_cast<uint64_t>(::ceilf(fraction * 4294967296.0f));
}

LUMINAV_HD uint16_t f32_to_f16_stochastic(float x, uint32_t r) {
  const uint32_t a = float_bits(x) & 0x7fffffffu;
  if (a >= 0x477fe000u) return f32_to_f16_rne(x);  // |x| >= 65504, NaN, Inf: as RNE
  const uint16_t nearest = f32_to_f16_rne(x);
  const float abs_x = bits_float(a);
  const float abs_nearest = f16_to_f32(static_cast<uint16_t>(nearest & 0x7fffu));
  if (abs_nearest == abs_x) return nearest;
  // f16 magnitudes are monotonic in their bits: step one code down or up.
  const uint16_t lo = abs_nearest > abs_x ? static_cast<uint16_t>(nearest - 1) : nearest;
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const float abs_lo = f16_to_f32(static_cast<uint16_t>(lo & 0x7fffu));
  const float abs_hi = f16_to_f32(static_cast<uint16_t>(hi & 0x7fffu));
  const float fraction = (abs_x - abs_lo) / (abs_hi - abs_lo);
  return static_cast<uint64_t>(r) < f16_round_up_threshold(fraction) ? hi : lo;
}

}  // namespace luminav::core
