// Vectorized core::rounding_bits (core/stochastic_hash.h): one 32-bit draw per
// float lane, bit-identical to the scalar hash of (seed, t, i).
//
// Per-target header (Highway's toggle guard). The hash is 64-bit; a float
// vector of N lanes needs two uint64 vectors of N/2 lanes: one holds the
// hashes of the even lanes' indices, the other those of the odd lanes', so
// that the high halves interleave back into lane order with one OddEven.

#if defined(LUMINAV_SIMD_STOCHASTIC_HASH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LUMINAV_SIMD_STOCHASTIC_HASH_INL_H_
#undef LUMINAV_SIMD_STOCHASTIC_HASH_INL_H_
#else
#define LUMINAV_SIMD_STOCHASTIC_HASH_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "optim/core/stochastic_hash.h"

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using core::kIndexFactor;
using core::kSeedFactor;
using core::kStepFactor;

#if HWY_TARGET != HWY_SCALAR

// a * c mod 2^64 per lane.
template <class DU64>
HWY_INLINE hn::Vec<DU64> mul_u64(DU64 du64, hn::Vec<DU64> a, uint64_t c) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return hn::Mul(a, hn::Set(du64, c));  // AVX-512DQ vpmullq
#else
  // Schoolbook on 32-bit halves; the hi*hi term only reaches bit 64.
  const hn::Repartition<uint32_t, DU64> du32;
  const auto c_lo = hn::BitCast(du32, hn::Set(du64, c & 0xffffffffull));
  const auto c_hi = hn::BitCast(du32, hn::Set(du64, c >> 32));
  const auto a_lo = hn::BitCast(du32, a);
  const auto a_hi = hn::BitCast(du32, hn::ShiftRight<32>(a));
  const auto lo_lo = hn::MulEven(a_lo, c_lo);
  const auto cross = hn::Add(hn::MulEven(a_hi, c_lo), hn::MulEven(a_lo, c_hi));
  return hn::Add(lo_lo, hn::ShiftLeft<32>(cross));
#endif
}

template <class DU64>
HWY_INLINE hn::Vec<DU64> finalize_hash(DU64 du64, hn::Vec<DU64> z) {
  z = hn::Xor(z, hn::ShiftRight<30>(z));
  z = mul_u64(du64, z, kStepFactor);
  z = hn::Xor(z, hn::ShiftRight<27>(z));
  z = mul_u64(du64, z, kIndexFactor);
  return hn::Xor(z, hn::ShiftRight<31>(z));
}

#endif  // HWY_TARGET != HWY_SCALAR

// The draws of Lanes(d) consecutive indices of one tensor: built once per
// range, then `bits(d, first)` gives lanes first, first+1, ... in order.
template <class D>
class RoundingStream {
 public:
  RoundingStream(D d, uint64_t seed, uint64_t step)
      : seed_(seed), step_(step), key_(seed * kSeedFactor + step * kStepFactor) {
#if HWY_TARGET != HWY_SCALAR
    const hn::Repartition<uint64_t, D> du64;
    for (size_t j = 0; j < hn::Lanes(du64); ++j) even_offsets_[j] = 2 * j * kIndexFactor;
#else
    (void)d;
#endif
  }

  HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> bits(D d, uint64_t first_index) const {
    const hn::RebindToUnsigned<D> du;
#if HWY_TARGET == HWY_SCALAR
    (void)d;
    return hn::Set(du, core::rounding_bits(seed_, step_, first_index));
#else
    const hn::Repartition<uint64_t, D> du64;
    const auto even = hn::Add(hn::Set(du64, key_ + first_index * kIndexFactor),
                              hn::Load(du64, even_offsets_));
    const auto odd = hn::Add(even, hn::Set(du64, kIndexFactor));
    const auto z_even = finalize_hash(du64, even);
    const auto z_odd = finalize_hash(du64, odd);
    // High half of each hash: the odd lanes' already sit in the odd uint32
    // lanes, the even lanes' move down by 32 bits.
    return hn::OddEven(hn::BitCast(du, z_odd), hn::BitCast(du, hn::ShiftRight<32>(z_even)));
#endif
  }

 private:
  uint64_t seed_, step_;
  uint64_t key_;  // seed * C1 + t * C2 (mod 2^64)
  // Lane j: 2j * C3 (kept as memory: scalable vectors cannot be members).
  HWY_ALIGN uint64_t even_offsets_[HWY_MAX_BYTES / sizeof(uint64_t)];
};

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // LUMINAV_SIMD_STOCHASTIC_HASH_INL_H_
