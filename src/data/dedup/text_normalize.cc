// Byte-level text normalization for dedup keys and shingles (Note [dedup
// normalization] in text_normalize.h).
#include "data/dedup/text_normalize.h"
#include "data/dedup/normalize_kernel.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <cstdint>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

// Per byte: 0 = word byte kept, 1 = ASCII separator, 2 = lead byte of a
// multi-byte sequence that may be a separator (separator_length decides).
struct ByteTable {
  std::array<uint8_t, 256> kind{};
  constexpr ByteTable() {
    for (int c = 0; c < 256; ++c) {
      bool space = c == ' ' || (c >= '\t' && c <= '\r');
      bool punct = (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
                   (c >= '{' && c <= '~');
      kind[c] = space || punct ? 1 : 0;
    }
    kind[0xC2] = kind[0xE2] = kind[0xE3] = 2;
  }
};
constexpr ByteTable kTable;

// Length of the separator sequence at p (n bytes left), or 0 when p starts a word byte.
inline size_t separator_length(const unsigned char* p, size_t n) {
  switch (kTable.kind[p[0]]) {
    case 1:
      return 1;
    case 2:
      if (p[0] == 0xC2) return n >= 2 && p[1] == 0xA0 ? 2 : 0;  // U+00A0
      if (n < 3 || (p[2] & 0xC0) != 0x80) return 0;
      if (p[0] == 0xE2) {  // U+2000..U+206F: E2 80 80..E2 81 AF
        return p[1] == 0x80 || (p[1] == 0x81 && p[2] <= 0xAF) ? 3 : 0;
      }
      return p[1] == 0x80 ? 3 : 0;  // U+3000..U+303F: E3 80 80..E3 80 BF
    default:
      return 0;
  }
}

}  // namespace

void normalize_words(std::string_view text, std::string& out, std::vector<uint32_t>& word_bounds) {
  if (text.size() > UINT32_MAX) {
    throw DataError(DataErrorKind::kUsage, "dedup: a single text over 4 GiB cannot be shingled");
  }
  word_bounds.clear();
  out.resize(text.size());  // the normalized text is never longer
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  char* w = out.data();
  char* const w0 = w;
  const size_t n = text.size();
  // 64 bytes at a time: the byte classes by the Highway kernel, then the word
  // runs of the separator mask copied whole (a byte-at-a-time table walk was
  // most of the MinHash signature time).
  alignas(64) uint8_t lowered[64];
  uint8_t padded[64];
  bool in_word = false;
  uint64_t carry = 0;  // bytes of this block inside a multi-byte separator that began in the last one
  for (size_t base = 0; base < n; base += 64) {
    const size_t len = std::min<size_t>(64, n - base);
    const uint8_t* src = p + base;
    if (len < 64) {
      std::memcpy(padded, src, len);
      std::memset(padded + len, 'a', 64 - len);  // past the end: word bytes, never read back
      src = padded;
    }
    uint64_t sep, lead;
    classify_block(src, lowered, &sep, &lead);
    const uint64_t valid = len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
    sep = (sep | carry) & valid;
    carry = 0;
    for (uint64_t m = lead & valid; m; m &= m - 1) {  // rare: U+00A0, U+2000..U+206F, U+3000..U+303F
      const size_t i = static_cast<size_t>(std::countr_zero(m));
      const size_t k = separator_length(p + base + i, n - base - i);
      for (size_t t = i; t < i + k; ++t) {
        if (t < 64) sep |= uint64_t{1} << t;
        else carry |= uint64_t{1} << (t - 64);
      }
    }
    size_t pos = 0;
    while (pos < len) {
      const uint64_t rest = sep >> pos;
      if (rest & 1) {  // a separator run ends the word
        if (in_word) word_bounds.push_back(static_cast<uint32_t>(w - w0));
        in_word = false;
        pos += static_cast<size_t>(std::countr_one(rest));
      } else {
        const size_t run = std::min(rest ? static_cast<size_t>(std::countr_zero(rest)) : 64 - pos, len - pos);
        if (!in_word) {
          if (w != w0) *w++ = ' ';
          word_bounds.push_back(static_cast<uint32_t>(w - w0));
          in_word = true;
        }
        std::memcpy(w, lowered + pos, run);
        w += run;
        pos += run;
      }
    }
  }
  if (in_word) word_bounds.push_back(static_cast<uint32_t>(w - w0));
  out.resize(static_cast<size_t>(w - w0));
}

std::string normalize_for_dedup(std::string_view text) {
  std::string out;
  std::vector<uint32_t> bounds;
  normalize_words(text, out, bounds);
  return out;
}

}  // namespace luminamoon
