// The dedup normalization's kernel (internal): Highway, every target,
// runtime dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminamoon {

// Bytes a caller's buffers must hold past the sizes below: the kernel stores
// whole 8-byte groups.
inline constexpr size_t kNormalizeSlack = 8;

struct NormalizedCounts {
  size_t bytes = 0;  // of the normalized text
  size_t words = 0;
};

// Writes the normalized form of the n bytes at p (Note [dedup normalization])
// into out (room for n + kNormalizeSlack bytes) and the offset in it of every
// word's first byte into word_starts (room for n / 2 + 1 values). One
// dispatch per text.
NormalizedCounts normalize_text(const uint8_t* p, size_t n, uint8_t* out, uint32_t* word_starts);

}  // namespace luminamoon
