// The PII validators: checksums (Luhn, mod-97), number ranges (SSN, IPv4),
// inet_pton for IPv6, and the context checks that keep ISBNs, DOIs, URLs and
// longer number runs from being masked.
#include "data/pii/pii_validators.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "luminamoon/pii_masker.h"

namespace luminamoon {
namespace {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
inline bool is_alpha(char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
inline bool is_alnum(char c) { return is_digit(c) || is_alpha(c); }
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
inline char at(std::string_view d, size_t i) { return i < d.size() ? d[i] : '\0'; }
inline char before(std::string_view d, size_t b) { return b ? d[b - 1] : '\0'; }
inline char before2(std::string_view d, size_t b) { return b > 1 ? d[b - 2] : '\0'; }

// The whitespace-delimited token around [b, e), at most 256 bytes each way
// (bounded so that the check stays O(1) per match).
std::string_view token_around(std::string_view d, size_t b, size_t e) {
  size_t tb = b, te = e;
  while (tb > 0 && b - tb < 256 && !is_space(d[tb - 1])) --tb;
  while (te < d.size() && te - e < 256 && !is_space(d[te])) ++te;
  return d.substr(tb, te - tb);
}

bool ieq_prefix(std::string_view s, std::string_view p) {
  if (s.size() < p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if ((s[i] | 0x20) != p[i]) return false;
  return true;
}

bool icontains(std::string_view s, std::string_view p) {
  for (size_t i = 0; i + p.size() <= s.size(); ++i)
    if (ieq_prefix(s.substr(i), p)) return true;
  return false;
}

}  // namespace

bool luhn_valid(std::string_view s) {
  int sum = 0, n = 0;
  for (size_t i = s.size(); i-- > 0;) {
    const char c = s[i];
    if (c == ' ' || c == '-') continue;
    if (!is_digit(c)) return false;
    int d = c - '0';
    if (n++ & 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return n > 0 && sum % 10 == 0;
}

bool ssn_valid(std::string_view s) {
  if (s.size() != 11 || s[3] != '-' || s[6] != '-') return false;
  for (size_t i : {0, 1, 2, 4, 5, 7, 8, 9, 10})
    if (!is_digit(s[i])) return false;
  const std::string_view area = s.substr(0, 3), group = s.substr(4, 2), serial = s.substr(7, 4);
  return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000";
}

bool ipv4_valid(std::string_view s) {
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    size_t j = i;
    while (j < s.size() && is_digit(s[j]) && j - i < 4) ++j;
    const size_t len = j - i;
    if (len == 0 || len > 3 || (len > 1 && s[i] == '0')) return false;
    int v = 0;
    for (size_t k = i; k < j; ++k) v = v * 10 + (s[k] - '0');
    if (v > 255) return false;
    ++parts;
    if (parts < 4) {
      if (j >= s.size() || s[j] != '.') return false;
      i = j + 1;
    } else {
      return j == s.size();
    }
  }
  return false;
}

namespace {

// ISO 13616 registry: IBAN length per country.
int iban_length(char a, char b) {
  static const struct {
    char cc[3];
    int len;
  } kTable[] = {
      {"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16}, {"BG", 22}, {"BH", 22},
      {"BR", 29}, {"BY", 28}, {"CH", 21}, {"CR", 22}, {"CY", 28}, {"CZ", 24}, {"DE", 22}, {"DK", 18}, {"DO", 28},
      {"EE", 20}, {"EG", 29}, {"ES", 24}, {"FI", 18}, {"FO", 18}, {"FR", 27}, {"GB", 22}, {"GE", 22}, {"GI", 23},
      {"GL", 18}, {"GR", 27}, {"GT", 28}, {"HR", 21}, {"HU", 28}, {"IE", 22}, {"IL", 23}, {"IQ", 23}, {"IS", 26},
      {"IT", 27}, {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28}, {"LC", 32}, {"LI", 21}, {"LT", 20}, {"LU", 20},
      {"LV", 21}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19}, {"MR", 27}, {"MT", 31}, {"MU", 30}, {"NL", 18},
      {"NO", 15}, {"PK", 24}, {"PL", 28}, {"PS", 29}, {"PT", 25}, {"QA", 29}, {"RO", 24}, {"RS", 22}, {"SA", 24},
      {"SC", 31}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27}, {"ST", 25}, {"SV", 28}, {"TL", 23}, {"TN", 24},
      {"TR", 26}, {"UA", 29}, {"VA", 22}, {"VG", 24}, {"XK", 20},
  };
  for (const auto& row : kTable)
    if (row.cc[0] == a && row.cc[1] == b) return row.len;
  return 0;
}

}  // namespace

bool iban_valid(std::string_view s) {
  std::string compact;
  for (char c : s)
    if (c != ' ') compact.push_back(c);
  if (compact.size() < 15 || compact.size() > 34) return false;
  if (!is_upper(compact[0]) || !is_upper(compact[1]) || !is_digit(compact[2]) || !is_digit(compact[3])) return false;
  if (iban_length(compact[0], compact[1]) != static_cast<int>(compact.size())) return false;
  // mod 97 of the rearranged number (country and check digits moved to the end, letters as 10..35).
  int rem = 0;
  auto feed = [&](char c) {
    if (is_digit(c)) {
      rem = (rem * 10 + (c - '0')) % 97;
    } else if (is_upper(c)) {
      const int v = c - 'A' + 10;
      rem = (rem * 100 + v) % 97;
    } else {
      rem = -1000000;
    }
  };
  for (size_t i = 4; i < compact.size(); ++i) feed(compact[i]);
  for (size_t i = 0; i < 4; ++i) feed(compact[i]);
  return rem == 1;
}

namespace pii {

bool is_isbn(std::string_view t) {
  std::string digits;
  size_t groups = 1, last_group = 0;
  for (char c : t) {
    if (is_digit(c) || c == 'X' || c == 'x') {
      digits.push_back(c == 'x' ? 'X' : c);
      ++last_group;
    } else if (c == '-' || c == ' ') {
      ++groups;
      last_group = 0;
    } else {
      return false;
    }
  }
  // Hyphenated ISBNs have 4 (ISBN-10) or 5 (ISBN-13) groups ending in the
  // one-character check digit; "415-555-2671" is a phone even when its digits
  // happen to pass the ISBN-10 checksum.
  if (groups > 1 && (last_group != 1 || groups != (digits.size() == 10 ? 4u : 5u))) return false;
  if (digits.size() == 10) {
    int sum = 0;
    for (int i = 0; i < 10; ++i) {
      const char c = digits[static_cast<size_t>(i)];
      if (c == 'X' && i != 9) return false;
      sum += (10 - i) * (c == 'X' ? 10 : c - '0');
    }
    return sum % 11 == 0;
  }
  if (digits.size() == 13 && (digits.compare(0, 3, "978") == 0 || digits.compare(0, 3, "979") == 0)) {
    int sum = 0;
    for (int i = 0; i < 13; ++i) {
      if (digits[static_cast<size_t>(i)] == 'X') return false;
      sum += (i % 2 ? 3 : 1) * (digits[static_cast<size_t>(i)] - '0');
    }
    return sum % 10 == 0;
  }
  return false;
}

bool in_isbn_or_doi_context(std::string_view d, size_t b, size_t e) {
  // "ISBN" or "doi" shortly before, on the same line.
  size_t lb = b;
  while (lb > 0 && b - lb < 24 && d[lb - 1] != '\n') --lb;
  const std::string_view left = d.substr(lb, b - lb);
  if (icontains(left, "isbn") || icontains(left, "doi")) return true;
  std::string_view tok = token_around(d, b, e);
  while (!tok.empty() && (tok.back() == '.' || tok.back() == ',' || tok.back() == ';' || tok.back() == ')')) tok.remove_suffix(1);
  while (!tok.empty() && (tok.front() == '(' || tok.front() == '[')) tok.remove_prefix(1);
  if (icontains(tok, "doi") || (tok.size() > 3 && tok.substr(0, 3) == "10." && tok.find('/') != std::string_view::npos))
    return true;
  return is_isbn(tok);
}

inline bool is_local_char(char c) { return is_alnum(c) || (c && std::strchr("!#$%&'*+=?^_`{|}~.-", c) != nullptr); }

bool validate_email(std::string_view d, size_t& b, size_t& e) {
  // The scan reports only the end (a leftmost start would cost 20x the scan
  // time); the '@' and the start are found here, in at most 253 + 65 bytes.
  size_t atpos = e;
  while (atpos > 0 && e - atpos <= 254 && d[atpos - 1] != '@') --atpos;
  if (atpos == 0 || d[atpos - 1] != '@') return false;
  --atpos;
  // The local part: the longest run of allowed characters before '@' without
  // "..", its leading dots removed; over 64 bytes is no address.
  size_t lb = atpos;
  while (lb > 0 && atpos - lb <= 64 && is_local_char(d[lb - 1]) && !(d[lb - 1] == '.' && lb < atpos && d[lb] == '.'))
    --lb;
  const bool stopped_at_dots = lb > 0 && d[lb - 1] == '.';
  if (lb > 0 && is_local_char(d[lb - 1]) && !stopped_at_dots) return false;  // over 64 bytes
  while (lb < atpos && d[lb] == '.') ++lb;
  if (lb == atpos || d[atpos - 1] == '.' || atpos - lb > 64) return false;
  if (before(d, lb) == '/') return false;  // a URL path
  // Domain labels: 1..63 bytes, no leading or trailing hyphen; at most 253 bytes.
  if (e - atpos - 1 > 253) return false;
  for (size_t i = atpos + 1, label = i; i <= e; ++i) {
    if (i == e || d[i] == '.') {
      if (i == label || i - label > 63 || d[label] == '-' || d[i - 1] == '-') return false;
      label = i + 1;
    }
  }
  const char n = at(d, e);
  if (is_alnum(n) || n == '-' || n == '_' || n == '@' || (n == '.' && is_alnum(at(d, e + 1)))) return false;
  // Inside a URL ("scheme://...") it is a userinfo or path, not an address;
  // a mailto: URL holds an address.
  const std::string_view tok = token_around(d, lb, e);
  const size_t tok_begin = static_cast<size_t>(tok.data() - d.data());
  const size_t scheme = tok.find("://");
  if (scheme != std::string_view::npos && tok_begin + scheme < lb) return false;
  b = lb;
  return true;
}

namespace {
bool ipv4_private(const uint8_t o[4]) {
  return o[0] == 0 || o[0] == 10 || o[0] == 127 || o[0] >= 224 || (o[0] == 100 && (o[1] & 0xC0) == 64) ||
         (o[0] == 169 && o[1] == 254) || (o[0] == 172 && (o[1] & 0xF0) == 16) || (o[0] == 192 && o[1] == 168) ||
         (o[0] == 192 && o[1] == 0 && (o[2] == 0 || o[2] == 2)) || (o[0] == 198 && (o[1] & 0xFE) == 18) ||
         (o[0] == 198 && o[1] == 51 && o[2] == 100) || (o[0] == 203 && o[1] == 0 && o[2] == 113);
}
}  // namespace

bool validate_ipv4(std::string_view d, size_t b, size_t e, bool keep_private) {
  const std::string_view s = d.substr(b, e - b);
  if (!ipv4_valid(s)) return false;
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '.' || p == '_' || is_alnum(n) || n == '_' || (n == '.' && is_digit(at(d, e + 1))))
    return false;
  if (keep_private) {
    uint8_t o[4];
    const std::string c(s);
    if (inet_pton(AF_INET, c.c_str(), o) == 1 && ipv4_private(o)) return false;
  }
  return true;
}

bool validate_ipv6(std::string_view d, size_t b, size_t e, bool keep_private) {
  if (e - b > 45) return false;
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '_' || p == ':' || p == '.' || is_alnum(n) || n == '_' || n == ':' ||
      (n == '.' && is_digit(at(d, e + 1))))
    return false;
  const std::string c(d.substr(b, e - b));
  uint8_t a[16];
  if (inet_pton(AF_INET6, c.c_str(), a) != 1) return false;
  int groups = 0;  // non-empty hex groups: "a::" or "::" alone are not addresses in prose
  for (size_t i = 0; i < c.size();) {
    if (c[i] == ':' || c[i] == '.') {
      ++i;
      continue;
    }
    ++groups;
    while (i < c.size() && c[i] != ':') ++i;
  }
  if (groups < 2) return false;
  if (keep_private) {
    const bool unspecified_or_loopback = std::all_of(a, a + 15, [](uint8_t x) { return x == 0; }) && a[15] <= 1;
    const bool link_local = a[0] == 0xFE && (a[1] & 0xC0) == 0x80;
    const bool unique_local = (a[0] & 0xFE) == 0xFC;
    const bool multicast = a[0] == 0xFF;
    const bool documentation = a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0D && a[3] == 0xB8;
    const bool mapped = std::all_of(a, a + 10, [](uint8_t x) { return x == 0; }) && a[10] == 0xFF && a[11] == 0xFF;
    if (unspecified_or_loopback || link_local || unique_local || multicast || documentation ||
        (mapped && ipv4_private(a + 12)))
      return false;
  }
  return true;
}

bool validate_phone(std::string_view d, size_t b, size_t e, bool nanp) {
  const std::string_view s = d.substr(b, e - b);
  std::string digits;
  int open = 0, close = 0, separators = 0;
  for (char c : s) {
    if (is_digit(c)) digits.push_back(c);
    else if (c == '(') ++open;
    else if (c == ')') ++close;
    else if (c == ' ' || c == '.' || c == '-') ++separators;
  }
  if (open != close || open > 1) return false;
  const bool plus = s[0] == '+';
  if (nanp) {
    std::string_view national = digits;
    if (national.size() == 11 && national[0] == '1') national.remove_prefix(1);
    if (national.size() != 10 || national[0] < '2' || national[3] < '2') return false;
    if (!plus && separators == 0 && open == 0 && digits.size() == 10) return false;  // a bare 10-digit number
  } else {
    if (!plus || digits.size() < 7 || digits.size() > 15) return false;
  }
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '_' || p == '/' || (!plus && p == '+')) return false;
  if ((p == '-' || p == '.') && is_digit(before2(d, b))) return false;
  if (is_alnum(n) || n == '_' || ((n == '-' || n == '.' || n == '/') && is_digit(at(d, e + 1)))) return false;
  return !in_isbn_or_doi_context(d, b, e);
}

bool validate_card(std::string_view d, size_t& b, size_t e) {
  const char n = at(d, e);
  if (is_alnum(n) || n == '_') return false;
  // The scan reports the leftmost start; a card may begin at a later group
  // ("ref 12 4111 1111 1111 1111"), so later group starts are tried too.
  for (size_t start = b; start < e;) {
    const std::string_view s = d.substr(start, e - start);
    int digits = 0;
    char sep = 0;
    bool mixed = false;
    for (char c : s) {
      if (is_digit(c)) ++digits;
      else if (sep && c != sep) mixed = true;
      else sep = c;
    }
    if (digits < 13) return false;
    const char p = before(d, start);
    if (!mixed && digits <= 19 && s[0] != '0' && !is_alnum(p) && p != '_' && p != '.' && luhn_valid(s) &&
        !in_isbn_or_doi_context(d, start, e)) {
      b = start;
      return true;
    }
    const size_t next = s.find_first_of(" -");
    if (next == std::string_view::npos) return false;
    start += next + 1;
  }
  return false;
}

bool validate_ssn(std::string_view d, size_t b, size_t e) {
  if (!ssn_valid(d.substr(b, e - b))) return false;
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '_' || ((p == '-' || p == '.') && is_digit(before2(d, b)))) return false;
  if (is_alnum(n) || n == '_' || ((n == '-' || n == '.') && is_digit(at(d, e + 1)))) return false;
  return !in_isbn_or_doi_context(d, b, e);
}

bool validate_iban(std::string_view d, size_t b, size_t e) {
  const std::string_view s = d.substr(b, e - b);
  if (s.find(' ') != std::string_view::npos) {  // printed form: groups of four
    size_t group = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == ' ') {
        if (group != 4) return false;
        group = 0;
      } else {
        ++group;
      }
    }
    if (group == 0 || group > 4) return false;
  }
  if (is_alnum(before(d, b)) || is_alnum(at(d, e))) return false;
  return iban_valid(s);
}

bool validate_token(std::string_view d, size_t b, size_t e) {
  const char p = before(d, b), n = at(d, e);
  return !(is_alnum(p) || p == '_' || is_alnum(n) || n == '_' || n == '-');
}

}  // namespace pii
}  // namespace luminamoon
