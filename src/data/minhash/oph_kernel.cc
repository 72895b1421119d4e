// The oph signature kernel: the shingle hashes mixed and split into bin and
// value with Highway (every x86/ARM target, runtime dispatch), the minima per
// bin kept in scalar code (a scatter), then the densification.
#include "data/minhash/oph_kernel.h"

#include <algorithm>
#include <vector>

// Note [one permutation hashing]
// Spec section 5, scheme oph (Shrivastava 2017, "Optimal densification for
// fast and accurate minwise hashing"). For a document's shingle hashes x
// (XXH3-64 of each normalized word n-gram), with K = num_perm = 2^k:
//   y = mix64(x ^ seed); j = y >> (64 - k) (0 when k = 0); w = y & (2^(64-k) - 1)
//   sig[j] = min(sig[j], w), every sig[j] starting at EMPTY = 2^64 - 1.
// Then each bin j still EMPTY takes sig[b] of the first b in the sequence
//   b_t = mix64(seed2 ^ (j << 32) ^ t) & (K - 1), t = 0, 1, 2, ...
// that was filled before densification (the same sequence for every
// document, so two documents agree on a densified bin exactly when they
// agree on the bin it borrowed from: the estimate stays unbiased). A
// document has at least one shingle, so at least one bin is filled (the one
// exception, K = 1 with w = 2^64 - 1, leaves the signature as it is).
// seed = params.seed ^ kOphSeedXor, seed2 = params.seed ^ kOphDensifySeedXor
// (include/luminamoon/minhash_lsh.h). Restated in Python in
// tests/dedup_reference.py (oph_signature).

// foreach_target.h includes this file once per target: the target-free code
// is compiled the first time only.
#ifndef LUMINA_OPH_KERNEL_TARGET_FREE
#define LUMINA_OPH_KERNEL_TARGET_FREE
namespace luminamoon {

void oph_densify(uint64_t seed2, int log2k, uint64_t* sig) {
  const size_t K = size_t{1} << log2k;
  bool any = false, all = true;
  for (size_t j = 0; j < K; ++j) {
    any |= sig[j] != kOphEmpty;
    all &= sig[j] != kOphEmpty;
  }
  if (!any || all) return;
  // Bins borrow from the signature before densification: mark the filled ones first.
  thread_local std::vector<uint8_t> filled;
  filled.assign(K, 0);
  for (size_t j = 0; j < K; ++j) filled[j] = sig[j] != kOphEmpty;
  for (size_t j = 0; j < K; ++j) {
    if (filled[j]) continue;
    for (uint64_t t = 0;; ++t) {
      const size_t b = static_cast<size_t>(mix64(seed2 ^ (static_cast<uint64_t>(j) << 32) ^ t) & (K - 1));
      if (filled[b]) {
        sig[j] = sig[b];
        break;
      }
    }
  }
}

void oph_signature_scalar(const uint64_t* x, size_t n, uint64_t seed, uint64_t seed2, int log2k, uint64_t* sig) {
  const size_t K = size_t{1} << log2k;
  std::fill(sig, sig + K, kOphEmpty);
  const uint64_t value_mask = log2k == 0 ? ~uint64_t{0} : (~uint64_t{0} >> log2k);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t y = mix64(x[i] ^ seed);
    const size_t j = log2k == 0 ? 0 : static_cast<size_t>(y >> (64 - log2k));
    sig[j] = std::min(sig[j], y & value_mask);
  }
  oph_densify(seed2, log2k, sig);
}

}  // namespace luminamoon
#endif  // LUMINA_OPH_KERNEL_TARGET_FREE

#ifdef LUMINA_MINHASH_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/minhash/oph_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "optim/simd/stochastic_hash-inl.h"  // finalize_hash: SplitMix64's finalizer per 64-bit lane

HWY_BEFORE_NAMESPACE();
namespace luminamoon {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void OphBin(const uint64_t* HWY_RESTRICT x, size_t n, uint64_t seed, int log2k, uint64_t* HWY_RESTRICT sig) {
  const hn::ScalableTag<uint64_t> d;
  const size_t N = hn::Lanes(d);
  const auto vseed = hn::Set(d, seed);
  const uint64_t value_mask = log2k == 0 ? ~uint64_t{0} : (~uint64_t{0} >> log2k);
  const auto vmask = hn::Set(d, value_mask);
  const int shift = 64 - log2k;
  HWY_ALIGN uint64_t bins[HWY_MAX_BYTES / 8];
  HWY_ALIGN uint64_t values[HWY_MAX_BYTES / 8];
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  for (; i + N <= n; i += N) {
    const auto y = luminav::simd::HWY_NAMESPACE::finalize_hash(d, hn::Xor(hn::LoadU(d, x + i), vseed));
    // log2k == 0: one bin (a shift by 64 is not defined).
    hn::Store(log2k == 0 ? hn::Zero(d) : hn::ShiftRightSame(y, shift), d, bins);
    hn::Store(hn::And(y, vmask), d, values);
    for (size_t l = 0; l < N; ++l) sig[bins[l]] = std::min(sig[bins[l]], values[l]);
  }
#else
  (void)N, (void)vseed, (void)vmask, (void)bins, (void)values;
#endif
  for (; i < n; ++i) {
    const uint64_t y = mix64(x[i] ^ seed);
    const size_t j = log2k == 0 ? 0 : static_cast<size_t>(y >> shift);
    sig[j] = std::min(sig[j], y & value_mask);
  }
}


}  // namespace HWY_NAMESPACE
}  // namespace luminamoon
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon {
HWY_EXPORT(OphBin);

void oph_signature_simd(const uint64_t* x, size_t n, uint64_t seed, uint64_t seed2, int log2k, uint64_t* sig) {
  std::fill(sig, sig + (size_t{1} << log2k), kOphEmpty);
  HWY_DYNAMIC_DISPATCH(OphBin)(x, n, seed, log2k, sig);
  oph_densify(seed2, log2k, sig);
}
}  // namespace luminamoon
#endif  // HWY_ONCE

#else  // !LUMINA_MINHASH_WITH_HWY

namespace luminamoon {
void oph_signature_simd(const uint64_t* x, size_t n, uint64_t seed, uint64_t seed2, int log2k, uint64_t* sig) {
  oph_signature_scalar(x, n, seed, seed2, log2k, sig);
}
}  // namespace luminamoon

#endif
