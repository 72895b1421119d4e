// The MinHash inner loop: for each permutation the minimum of
// (a_k*x + b_k) mod (2^61 - 1) over a document's shingle hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "luminamoon/minhash_lsh.h"

namespace luminamoon {

// x mod (2^61 - 1), in [0, 2^61 - 1).
inline uint64_t reduce_mod_mersenne61(uint64_t x) {
  uint64_t r = (x & kMinHashPrime) + (x >> 61);
  return r >= kMinHashPrime ? r - kMinHashPrime : r;
}

// The permutations laid out for the vector kernel: a_k split into 32-bit
// halves, padded with (a, b) = (1, 0) to a multiple of kPermutationPad.
struct PermutationLanes {
  static constexpr size_t kPermutationPad = 32;
  std::vector<uint64_t> a_lo, a_hi, b;
  size_t padded = 0;
  explicit PermutationLanes(const MinHashPermutations& p);
};

// out[k] = min over i of (a_k * x[i] + b_k) mod p for k < lanes.padded, with
// every x[i] already reduced mod p and n >= 1. Highway, dynamic dispatch.
void minhash_min_simd(const uint64_t* x, size_t n, const PermutationLanes& lanes, uint64_t* out);
// The reference: unsigned __int128 products on the raw (unreduced) hashes.
void minhash_min_scalar(const uint64_t* x, size_t n, const MinHashPermutations& p, uint64_t* out);
// The Highway target minhash_min_simd runs on this CPU ("scalar" without Highway).
const char* minhash_simd_target();

}  // namespace luminamoon
