// UTF-8 validation (simdjson's SIMD validator) and the Unicode replacement of
// maximal subparts of ill-formed subsequences.
#include <simdjson.h>

#include <string>
#include <string_view>

#include "luminamoon/text_cleaner.h"

namespace luminamoon {
namespace {

// Note [maximal subparts]: Unicode 15, section 3.9, "U+FFFD Substitution of
// Maximal Subparts". Table 3-7 lists the well-formed byte sequences; a maximal
// subpart is the longest prefix of a well-formed sequence found at the current
// position (at least one byte). Each maximal subpart becomes one U+FFFD, so a
// lead byte whose second byte is out of range is replaced alone and the
// second byte is examined again as a possible lead.
//
// Returns the length of the well-formed sequence at s[0] (1..4), or 0 and
// the maximal subpart length in *bad.
inline size_t well_formed_length(const uint8_t* s, size_t n, size_t* bad) {
  const uint8_t b = s[0];
  if (b < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;         // no overlong 3-byte forms
    else if (b == 0xED) hi = 0x9F;    // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;         // no overlong 4-byte forms
    else if (b == 0xF4) hi = 0x8F;    // nothing above U+10FFFF
  } else {
    *bad = 1;  // 80..C1 and F5..FF never start a sequence
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (k >= n) {
      *bad = k;  // truncated at the end of the document
      return 0;
    }
    const uint8_t c = s[k];
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) {
      *bad = k;
      return 0;
    }
  }
  return len;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  return simdjson::validate_utf8(bytes.data(), bytes.size());
}

size_t first_invalid_utf8(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return bytes.size();
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    size_t bad = 0;
    const size_t len = well_formed_length(s + i, n - i, &bad);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

void replace_invalid_utf8(std::string_view bytes, std::string& out) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  out.reserve(out.size() + n + 16);
  size_t i = 0, run = 0;  // [run, i) is well-formed and not yet copied
  while (i < n) {
    size_t bad = 0;
    const size_t len = well_formed_length(s + i, n - i, &bad);
    if (len) {
      i += len;
      continue;
    }
    out.append(bytes.data() + run, i - run);
    out.append(kReplacement, 3);
    i += bad;
    run = i;
  }
  out.append(bytes.data() + run, n - run);
}

}  // namespace luminamoon
