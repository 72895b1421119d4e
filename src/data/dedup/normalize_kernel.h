// The dedup normalization's kernel (internal): Highway, every target,
// runtime dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminamoon {

// Bytes a caller's buffers must hold past the sizes below: the kernel stores
// whole 8-byte groups, or whole 64-byte blocks on AVX-512.
inline constexpr size_t kNormalizeSlack = 64;
// Entries a caller's word_starts must hold past n / 2 + 1: the kernel writes
// word starts a dozen at a time (Note [word starts a dozen at a time]), or
// 16 at a time on AVX-512.
inline constexpr size_t kNormalizeStartsSlack = 16;

struct NormalizedCounts {
  size_t bytes = 0;  // of the normalized text
  size_t words = 0;
};

// Writes the normalized form of the n bytes at p (Note [dedup normalization])
// into out (room for n + kNormalizeSlack bytes) and the offset in it of every
// word's first byte into word_starts (room for n / 2 + 1 +
// kNormalizeStartsSlack values). One
// dispatch per text.
NormalizedCounts normalize_text(const uint8_t* p, size_t n, uint8_t* out, uint32_t* word_starts);

}  // namespace luminamoon
