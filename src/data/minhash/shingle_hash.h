// The spec's shingle hash, XXH3-64 (seed kShingleHashSeed) of a shingle's
// bytes, with the length dispatch of the 17-64 byte range made branch-free
// (Note [branch-free shingle hash]).
#pragma once

#include <cstddef>
#include <cstdint>

// Inlined: the shingles are short (~30 bytes), where a call into the shared
// library and its generic entry cost as much as the hash itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "luminamoon/minhash_lsh.h"

namespace luminamoon {

// Note [branch-free shingle hash]
// XXH3-64 picks its code by length: 17-32 bytes mix two 16-byte lanes, 33-64
// bytes four (XXH3_len_17to128_64b). Word 5-gram shingles of real text are
// 20-45 bytes long, on both sides of 32 in no order, so the branch on the
// length mispredicted about every other shingle. Here both pairs of lanes
// are computed and the second pair is added under a mask: the same sums in
// the same wrapping arithmetic, so the same bits (tested against
// XXH3_64bits_withSeed for every length and offset in minhash_test.cc). The
// extra lanes of a 17-32 byte shingle read up to 16 bytes before and after
// it, so this path needs 16 bytes of the buffer on each side; the first and
// last shingles of a text, and shingles of other lengths, take the library's
// entry. The mixing functions are xxHash's own (XXH3_mix16B, XXH3_avalanche).
inline uint64_t shingle_hash(const char* buffer, size_t buffer_size, size_t begin, size_t end) {
  const auto* p = reinterpret_cast<const xxh_u8*>(buffer) + begin;
  const size_t len = end - begin;
  if (len > 16 && len <= 64 && begin >= 16 && end + 16 <= buffer_size) {
    const xxh_u8* s = XXH3_kSecret;
    const uint64_t seed = kShingleHashSeed;
    uint64_t acc = len * XXH_PRIME64_1 + XXH3_mix16B(p, s, seed) + XXH3_mix16B(p + len - 16, s + 16, seed);
    const uint64_t wide = XXH3_mix16B(p + 16, s + 32, seed) + XXH3_mix16B(p + len - 32, s + 48, seed);
    acc += wide & (uint64_t{0} - static_cast<uint64_t>(len > 32));
    return XXH3_avalanche(acc);
  }
  return XXH3_64bits_withSeed(p, len, kShingleHashSeed);
}

}  // namespace luminamoon
