// The permutation parameters a_k, b_k of MinHash (Note [MinHash permutations]).
#include "luminamoon/minhash_lsh.h"

#include "data/minhash/oph_kernel.h"  // mix64, SplitMix64's finalizer

namespace luminamoon {

// Note [MinHash permutations]
// SplitMix64 (Steele, Lea and Flood 2014): state += 0x9E3779B97F4A7C15;
// z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) *
// 0x94D049BB133111EB; return z ^ z >> 31. Starting from state = seed, for
// k = 0 .. num_perm-1: a_k = 1 + next() % (p - 1), b_k = next() % p with
// p = 2^61 - 1 (the modulo bias, below 2^-3, does not matter for hashing).
// The test suite re-derives these in Python from this description alone.
MinHashPermutations MinHashPermutations::generate(int num_perm, uint64_t seed) {
  uint64_t state = seed;
  auto next = [&state] { return mix64(state += 0x9E3779B97F4A7C15ull); };
  MinHashPermutations p;
  p.a.resize(static_cast<size_t>(num_perm));
  p.b.resize(static_cast<size_t>(num_perm));
  for (int k = 0; k < num_perm; ++k) {
    p.a[k] = 1 + next() % (kMinHashPrime - 1);
    p.b[k] = next() % kMinHashPrime;
  }
  return p;
}

}  // namespace luminamoon
