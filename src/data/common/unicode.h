// Code point decoding and the Unicode classes the batch stages need
// (White_Space, an alphabetic approximation), for already-valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminamoon::unicode {

// Decodes the code point at s[i] of valid UTF-8 and advances i.
inline uint32_t next_code_point(const uint8_t* s, size_t& i) {
  const uint8_t b = s[i];
  if (b < 0x80) {
    i += 1;
    return b;
  }
  if (b < 0xE0) {
    const uint32_t cp = (uint32_t(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
    i += 2;
    return cp;
  }
  if (b < 0xF0) {
    const uint32_t cp = (uint32_t(b & 0x0F) << 12) | (uint32_t(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    i += 3;
    return cp;
  }
  const uint32_t cp = (uint32_t(b & 0x07) << 18) | (uint32_t(s[i + 1] & 0x3F) << 12) |
                      (uint32_t(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
  i += 4;
  return cp;
}

// Number of code points: every byte that is not a continuation byte.
inline size_t count_code_points(const uint8_t* s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += (s[i] & 0xC0) != 0x80;
  return c;
}

// The Unicode White_Space property (Unicode 15 PropList.txt).
inline bool is_white_space(uint32_t cp) {
  if (cp < 0x80) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Note [alphabetic]: "a word with an alphabetic character" needs a letter
// class; without ICU we use block ranges: ASCII letters, Latin-1 letters,
// and every script block, excluding the punctuation, symbol, emoji, private
// use and surrogate blocks. tests/data/test_quality.py restates this table.
inline bool is_alphabetic(uint32_t cp) {
  if (cp < 0x80) return ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  if (cp < 0xC0) return cp == 0xAA || cp == 0xB5 || cp == 0xBA;
  if (cp < 0x2B0) return cp != 0xD7 && cp != 0xF7;
  if (cp < 0x370) return false;           // spacing modifiers, combining marks
  if (cp < 0x2000) return true;           // Greek .. Greek Extended
  if (cp < 0x2C00) return false;          // punctuation, symbols, arrows, math, dingbats
  if (cp < 0x2E00) return true;           // Glagolitic .. Cyrillic Extended-A
  if (cp < 0x3040) return false;          // supplemental punctuation, CJK radicals, CJK symbols
  if (cp < 0x3200) return true;           // kana, bopomofo, Hangul jamo
  if (cp < 0x3400) return false;          // enclosed CJK, compatibility
  if (cp < 0x4DC0) return true;           // CJK extension A
  if (cp < 0x4E00) return false;          // Yijing hexagrams
  if (cp < 0xD800) return true;           // CJK unified, Yi, Hangul syllables, ...
  if (cp < 0xF900) return false;          // surrogates, private use
  if (cp < 0xFE00) return true;           // CJK compatibility, presentation forms
  if (cp < 0xFE70) return false;          // variation selectors, vertical/small forms
  if (cp < 0xFEFF) return true;           // Arabic presentation forms-B
  if (cp < 0xFF00) return false;
  if (cp < 0xFFF0)
    return (cp >= 0xFF21 && cp <= 0xFF3A) || (cp >= 0xFF41 && cp <= 0xFF5A) || (cp >= 0xFF66 && cp <= 0xFFDC);
  if (cp < 0x10000) return false;
  if (cp < 0x1D000) return true;          // historic scripts
  if (cp < 0x1D400) return false;         // musical symbols
  if (cp < 0x1F000) return true;          // mathematical alphanumerics, ...
  if (cp < 0x20000) return false;         // emoji and symbols
  return cp < 0x40000;                    // CJK extensions
}

}  // namespace luminamoon::unicode
