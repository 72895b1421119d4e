// JSON text helpers shared by the readers (metadata objects) and the NDJSON
// writer: string escaping that always yields valid UTF-8 JSON.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace luminamoon::json_text {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF) starting at p[i], or 0 if ill-formed.
inline size_t valid_sequence_length(const uint8_t* p, size_t n, size_t i) {
  const uint8_t c = p[i];
  if (c < 0x80) return 1;
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  }
  if (len == 0 || i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    const uint8_t b = p[i + k];
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
  }
  return len;
}

// `s` with each byte of an ill-formed sequence replaced by U+FFFD (as
// append_string does): for names (file names, ids) that must be valid UTF-8.
inline std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const size_t len = valid_sequence_length(p, s.size(), i);
    if (len > 0) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// The length of the run at the start of [p, p + n) that a JSON string holds
// as it is: printable ASCII other than '"' and '\\'. Eight bytes at a time:
// each test flags a byte in bit 7 of its lane, exactly for the lowest lane
// that matches (a borrow can only spill into higher lanes), so the lowest
// flag of their union is the first byte that needs attention.
inline size_t plain_json_run(const uint8_t* p, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  size_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    for (; i + 8 <= n; i += 8) {
      uint64_t x;
      std::memcpy(&x, p + i, 8);
      const uint64_t quote = x ^ (kOnes * '"'), backslash = x ^ (kOnes * '\\');
      const uint64_t flags = (x & kHigh) | ((x - kOnes * 0x20) & ~x & kHigh) |
                             ((quote - kOnes) & ~quote & kHigh) | ((backslash - kOnes) & ~backslash & kHigh);
      if (flags) return i + static_cast<size_t>(std::countr_zero(flags)) / 8;
    }
  }
  while (i < n && p[i] >= 0x20 && p[i] < 0x80 && p[i] != '"' && p[i] != '\\') ++i;
  return i;
}

// Appends `s` as a quoted JSON string. Each byte of an ill-formed UTF-8
// sequence becomes U+FFFD, so the output is always valid JSON (with the
// cleaner on, the text was already repaired per the Unicode standard).
inline void append_string(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out.push_back('"');
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: a run of printable ASCII that needs no escape.
    const size_t run = i + plain_json_run(p + i, n - i);
    out.append(s.data() + i, run - i);
    i = run;
    if (i >= n) break;
    uint8_t c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
      }
      ++i;
      continue;
    }
    const size_t len = valid_sequence_length(p, n, i);
    const bool valid = len > 0;
    if (valid) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out.push_back('"');
}

inline std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return s.substr(b, e - b);
}

}  // namespace luminamoon::json_text
