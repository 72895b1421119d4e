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

constexpr size_t kCopyChunk = 16;

}  // namespace

void normalize_words(std::string_view text, std::string& out, std::vector<uint32_t>& word_bounds) {
  if (text.size() > UINT32_MAX) {
    throw DataError(DataErrorKind::kUsage, "dedup: a single text over 4 GiB cannot be shingled");
  }
  word_bounds.clear();
  const size_t n = text.size();
  // The normalized text is never longer; the slack lets words be copied in
  // whole 16-byte chunks.
  out.resize(n + kCopyChunk);
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  char* w = out.data();
  char* const w0 = w;
  // 64 bytes at a time: the byte classes of every block by the Highway
  // kernel (one dispatch), then one step per word of the separator masks,
  // each word copied in 16-byte chunks (a byte-at-a-time table walk was most
  // of the MinHash signature time).
  const size_t blocks = (n + 63) / 64;
  thread_local std::vector<uint8_t> lowered_buf;
  thread_local std::vector<uint64_t> sep_buf, lead_buf;
  if (lowered_buf.size() < blocks * 64 + kCopyChunk) lowered_buf.resize(blocks * 64 + kCopyChunk);
  if (sep_buf.size() < blocks) sep_buf.resize(blocks), lead_buf.resize(blocks);
  uint8_t* const lowered_all = lowered_buf.data();
  if (n >= 64) classify_blocks(p, n / 64, lowered_all, sep_buf.data(), lead_buf.data());
  if (n % 64) {
    uint8_t padded[64];
    std::memcpy(padded, p + n / 64 * 64, n % 64);
    std::memset(padded + n % 64, ' ', 64 - n % 64);  // past the end: separators
    classify_blocks(padded, 1, lowered_all + n / 64 * 64, sep_buf.data() + n / 64, lead_buf.data() + n / 64);
  }
  const uint8_t* lowered = lowered_all;
  bool in_word = false;  // the last block ended inside a word
  uint64_t carry = 0;    // bytes of this block inside a multi-byte separator that began in the last one
  auto copy = [&](size_t from, size_t len) {
    for (size_t c = 0; c < len; c += kCopyChunk) std::memcpy(w + c, lowered + from + c, kCopyChunk);
    w += len;
  };
  auto open_word = [&] {
    if (w != w0) *w++ = ' ';
    word_bounds.push_back(static_cast<uint32_t>(w - w0));
  };
  auto close_word = [&] { word_bounds.push_back(static_cast<uint32_t>(w - w0)); };
  for (size_t base = 0; base < n; base += 64, lowered += 64) {
    const size_t len = std::min<size_t>(64, n - base);
    uint64_t sep = sep_buf[base / 64] | carry;
    const uint64_t lead = lead_buf[base / 64];
    const uint64_t valid = len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
    carry = 0;
    for (uint64_t m = lead & valid; m; m &= m - 1) {  // rare: U+00A0, U+2000..U+206F, U+3000..U+303F
      const size_t i = static_cast<size_t>(std::countr_zero(m));
      const size_t k = separator_length(p + base + i, n - base - i);
      for (size_t t = i; t < i + k; ++t) {
        if (t < 64) sep |= uint64_t{1} << t;
        else carry |= uint64_t{1} << (t - 64);
      }
    }
    const uint64_t word = ~sep;  // bytes past the end are separators (padding)
    uint64_t starts = word & ~(word << 1);
    if (in_word) {
      if (word & 1) {  // the word of the last block goes on
        starts &= ~uint64_t{1};
        const size_t run = static_cast<size_t>(std::countr_one(word));
        copy(0, run);
        if (run < 64) close_word(), in_word = false;
      } else {
        close_word();
        in_word = false;
      }
    }
    for (; starts; starts &= starts - 1) {
      const size_t s = static_cast<size_t>(std::countr_zero(starts));
      const size_t run = static_cast<size_t>(std::countr_one(word >> s));
      open_word();
      copy(s, run);
      if (s + run < 64) close_word();
      else in_word = true;  // reaches the block's end: may go on in the next one
    }
  }
  if (in_word) close_word();
  out.resize(static_cast<size_t>(w - w0));
}

std::string normalize_for_dedup(std::string_view text) {
  std::string out;
  std::vector<uint32_t> bounds;
  normalize_words(text, out, bounds);
  return out;
}

}  // namespace luminamoon
