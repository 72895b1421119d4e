// MinHash permutation minima, written once against Highway and compiled for
// every x86/ARM target (Note [Mersenne product] explains the arithmetic).
#include "data/minhash/minhash_kernel.h"

#include <algorithm>

#ifdef LUMINA_MINHASH_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/minhash/minhash_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace luminamoon {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Note [Mersenne product]
// With a = ah*2^32 + al and x = xh*2^32 + xl (a, x < 2^61, so ah, xh < 2^29),
// a*x = hh*2^64 + mid*2^32 + ll with hh = ah*xh < 2^58, mid = ah*xl + al*xh
// < 2^62 and ll = al*xl < 2^64: four 32x32->64 products (MulEven). Modulo
// p = 2^61 - 1, 2^61 = 1 and so 2^64 = 8; writing mid = mh*2^29 + ml (ml <
// 2^29), mid*2^32 = mh*2^61 + ml*2^32 = mh + ml*2^32; ll = (ll >> 61) + (ll & p).
// The sum 8*hh + mh + ml*2^32 + (ll & p) + (ll >> 61) + b stays below 2^64;
// one fold (s & p) + (s >> 61) leaves it below p + 8 and one conditional
// subtraction (an unsigned min with s - p, which wraps when s < p) finishes.
#if HWY_TARGET == HWY_SCALAR
// One lane: no u32 halves to reinterpret, so the product is plain C++.
template <class D, class D32, class V>
HWY_INLINE V PermuteMod(D d, D32, V al, V ah, V b, V xl, V xh) {
  const uint64_t a = hn::GetLane(ah) << 32 | hn::GetLane(al);
  const uint64_t x = hn::GetLane(xh) << 32 | hn::GetLane(xl);
  const unsigned __int128 v = static_cast<unsigned __int128>(a) * x + hn::GetLane(b);
  const uint64_t folded = static_cast<uint64_t>(v & kMinHashPrime) +
                          static_cast<uint64_t>(v >> 61);  // < 2^62, then one more fold
  return hn::Set(d, reduce_mod_mersenne61(folded));
}
#else
template <class D, class D32, class V>
HWY_INLINE V PermuteMod(D d, D32 d32, V al, V ah, V b, V xl, V xh) {
  const V prime = hn::Set(d, kMinHashPrime);
  const V ll = hn::MulEven(hn::BitCast(d32, al), hn::BitCast(d32, xl));
  const V hh = hn::MulEven(hn::BitCast(d32, ah), hn::BitCast(d32, xh));
  const V mid = hn::Add(hn::MulEven(hn::BitCast(d32, ah), hn::BitCast(d32, xl)),
                        hn::MulEven(hn::BitCast(d32, al), hn::BitCast(d32, xh)));
  V s = hn::Add(hn::ShiftLeft<3>(hh), hn::ShiftRight<29>(mid));
  s = hn::Add(s, hn::ShiftLeft<32>(hn::And(mid, hn::Set(d, (uint64_t{1} << 29) - 1))));
  s = hn::Add(s, hn::Add(hn::And(ll, prime), hn::ShiftRight<61>(ll)));
  s = hn::Add(s, b);
  s = hn::Add(hn::And(s, prime), hn::ShiftRight<61>(s));
  return hn::Min(s, hn::Sub(s, prime));
}
#endif  // HWY_TARGET == HWY_SCALAR

void MinOverShingles(const uint64_t* HWY_RESTRICT x, size_t n, const uint64_t* HWY_RESTRICT a_lo,
                     const uint64_t* HWY_RESTRICT a_hi, const uint64_t* HWY_RESTRICT b,
                     size_t padded, uint64_t* HWY_RESTRICT out) {
  const hn::ScalableTag<uint64_t> d;
  const hn::Repartition<uint32_t, decltype(d)> d32;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  // Four vectors of permutations per pass keep their constants and minima in
  // registers while the shingles stream by (padded is a multiple of 4 * N).
  for (size_t k = 0; k < padded; k += 4 * N) {
    const V al0 = hn::LoadU(d, a_lo + k), al1 = hn::LoadU(d, a_lo + k + N),
            al2 = hn::LoadU(d, a_lo + k + 2 * N), al3 = hn::LoadU(d, a_lo + k + 3 * N);
    const V ah0 = hn::LoadU(d, a_hi + k), ah1 = hn::LoadU(d, a_hi + k + N),
            ah2 = hn::LoadU(d, a_hi + k + 2 * N), ah3 = hn::LoadU(d, a_hi + k + 3 * N);
    const V b0 = hn::LoadU(d, b + k), b1 = hn::LoadU(d, b + k + N),
            b2 = hn::LoadU(d, b + k + 2 * N), b3 = hn::LoadU(d, b + k + 3 * N);
    V m0 = hn::Set(d, ~uint64_t{0}), m1 = m0, m2 = m0, m3 = m0;
    for (size_t i = 0; i < n; ++i) {
      const V xl = hn::Set(d, x[i] & 0xFFFFFFFFu);
      const V xh = hn::Set(d, x[i] >> 32);
      m0 = hn::Min(m0, PermuteMod(d, d32, al0, ah0, b0, xl, xh));
      m1 = hn::Min(m1, PermuteMod(d, d32, al1, ah1, b1, xl, xh));
      m2 = hn::Min(m2, PermuteMod(d, d32, al2, ah2, b2, xl, xh));
      m3 = hn::Min(m3, PermuteMod(d, d32, al3, ah3, b3, xl, xh));
    }
    hn::StoreU(m0, d, out + k);
    hn::StoreU(m1, d, out + k + N);
    hn::StoreU(m2, d, out + k + 2 * N);
    hn::StoreU(m3, d, out + k + 3 * N);
  }
}

const char* TargetNameHere() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace luminamoon
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon {
HWY_EXPORT(MinOverShingles);
HWY_EXPORT(TargetNameHere);

void minhash_min_simd(const uint64_t* x, size_t n, const PermutationLanes& lanes, uint64_t* out) {
  HWY_DYNAMIC_DISPATCH(MinOverShingles)(x, n, lanes.a_lo.data(), lanes.a_hi.data(),
                                        lanes.b.data(), lanes.padded, out);
}
const char* minhash_simd_target() { return HWY_DYNAMIC_DISPATCH(TargetNameHere)(); }
}  // namespace luminamoon
#endif  // HWY_ONCE

#else  // !LUMINA_MINHASH_WITH_HWY

namespace luminamoon {
void minhash_min_simd(const uint64_t* x, size_t n, const PermutationLanes& lanes, uint64_t* out) {
  for (size_t k = 0; k < lanes.padded; ++k) {
    const uint64_t a = lanes.a_hi[k] << 32 | lanes.a_lo[k];
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < n; ++i) {
      unsigned __int128 v = static_cast<unsigned __int128>(a) * x[i] + lanes.b[k];
      m = std::min(m, static_cast<uint64_t>(v % kMinHashPrime));
    }
    out[k] = m;
  }
}
const char* minhash_simd_target() { return "scalar"; }
}  // namespace luminamoon

#endif
