// One-permutation hashing with optimal densification (spec section 5, scheme
// oph): one mix per shingle hash into K = 2^k bins, then the empty bins filled.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminamoon {

// SplitMix64's finalizer (Steele, Lea and Flood 2014).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline constexpr uint64_t kOphEmpty = ~uint64_t{0};

// sig[0 .. 2^log2k) = the oph signature of the n >= 1 shingle hashes x:
// binned with seed, densified with seed2. The Highway kernel (dynamic
// dispatch) and the scalar reference give the same bits.
void oph_signature_simd(const uint64_t* x, size_t n, uint64_t seed, uint64_t seed2, int log2k, uint64_t* sig);
void oph_signature_scalar(const uint64_t* x, size_t n, uint64_t seed, uint64_t seed2, int log2k, uint64_t* sig);

// Fills every empty bin of sig (2^log2k values) from the first filled bin of
// its sequence (Note [one permutation hashing]); shared by both kernels.
void oph_densify(uint64_t seed2, int log2k, uint64_t* sig);

}  // namespace luminamoon
