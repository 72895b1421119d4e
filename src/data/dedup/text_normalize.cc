// Byte-level text normalization for dedup keys and shingles (Note [dedup
// normalization] in text_normalize.h).
#include "data/dedup/text_normalize.h"

#include <array>
#include <cstdint>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

// Per byte: 0 = word byte kept, 1 = ASCII separator, 2 = lead byte of a
// multi-byte sequence that may be a separator; ASCII A-Z lower-cased via lower.
struct ByteTable {
  std::array<uint8_t, 256> kind{};
  std::array<char, 256> lower{};
  constexpr ByteTable() {
    for (int c = 0; c < 256; ++c) {
      lower[c] = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
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
  size_t i = 0;
  for (;;) {
    // Skip separators: ASCII ones by table, multi-byte ones by their check.
    while (i < n) {
      const uint8_t kind = kTable.kind[p[i]];
      if (kind == 0) break;
      if (kind == 1) {
        ++i;
        continue;
      }
      const size_t sep = separator_length(p + i, n - i);
      if (sep == 0) break;
      i += sep;
    }
    if (i == n) break;
    if (w != w0) *w++ = ' ';
    word_bounds.push_back(static_cast<uint32_t>(w - w0));
    // Copy the word: the common case is one table load and one store a byte.
    for (;;) {
      const uint8_t kind = kTable.kind[p[i]];
      if (kind == 1 || (kind == 2 && separator_length(p + i, n - i) != 0)) break;
      *w++ = kTable.lower[p[i]];
      if (++i == n) break;
    }
    word_bounds.push_back(static_cast<uint32_t>(w - w0));
  }
  out.resize(static_cast<size_t>(w - w0));
}

std::string normalize_for_dedup(std::string_view text) {
  std::string out;
  std::vector<uint32_t> bounds;
  normalize_words(text, out, bounds);
  return out;
}

}  // namespace luminamoon
