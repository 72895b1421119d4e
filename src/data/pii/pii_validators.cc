// The PII validators: checksums (Luhn, mod-97), number ranges (SSN, IPv4),
// inet_pton for IPv6, and the context checks that keep ISBNs, DOIs, URLs and
// longer number runs from being masked.
#include "data/pii/pii_validators.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>
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
  // AAA-GG-SSSS, or with spaces or dots ("078 05 1123", "078.05.1123"): one separator kind.
  if (s.size() != 11 || s[3] != s[6] || (s[3] != '-' && s[3] != ' ' && s[3] != '.')) return false;
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
      // Registered since 2020 (SWIFT IBAN registry): Libya, Sudan, Burundi,
      // Djibouti, Russia, Falklands, Mongolia, Somalia, Nicaragua, Oman, Yemen.
      {"LY", 25}, {"SD", 18}, {"BI", 27}, {"DJ", 27}, {"RU", 33}, {"FK", 18}, {"MN", 20}, {"SO", 23},
      {"NI", 28}, {"OM", 23}, {"YE", 30},
  };
  for (const auto& row : kTable)
    if (row.cc[0] == a && row.cc[1] == b) return row.len;
  return 0;
}

}  // namespace

bool iban_valid(std::string_view s) {
  std::string compact;
  for (char c : s)
    if (c != ' ' && c != '-') compact.push_back(c);
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

namespace {

// The word before b on the same line (skipping spaces and opening
// punctuation), lower-cased ASCII, at most 24 bytes; trailing ':' removed.
std::string word_before(std::string_view d, size_t b) {
  size_t i = b;
  while (i > 0 && (d[i - 1] == ' ' || d[i - 1] == '\t' || d[i - 1] == '(' || d[i - 1] == '[')) --i;
  while (i > 0 && d[i - 1] == ':') --i;
  size_t j = i;
  while (j > 0 && i - j < 24 && !is_space(d[j - 1]) && d[j - 1] != '(' && d[j - 1] != '[') --j;
  std::string w(d.substr(j, i - j));
  for (char& c : w) c = static_cast<char>(c | (is_alpha(c) ? 0x20 : 0));
  return w;
}

bool one_of(std::string_view w, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

// Any of the words, as whole words (ASCII, case-insensitive), in [lb, le).
bool line_has_word(std::string_view d, size_t lb, size_t le, std::initializer_list<std::string_view> words) {
  size_t i = lb;
  while (i < le) {
    while (i < le && !is_alpha(d[i])) ++i;
    size_t j = i;
    while (j < le && (is_alpha(d[j]) || is_digit(d[j]))) ++j;
    if (j > i && j - i <= 12) {
      char w[12];
      for (size_t k = i; k < j; ++k) w[k - i] = static_cast<char>(d[k] | 0x20);
      if (one_of(std::string_view(w, j - i), words)) return true;
    }
    i = j;
  }
  return false;
}

// The line holding [b, e), at most 160 bytes each way.
std::pair<size_t, size_t> line_around(std::string_view d, size_t b, size_t e) {
  size_t lb = b, le = e;
  while (lb > 0 && b - lb < 160 && d[lb - 1] != '\n') --lb;
  while (le < d.size() && le - e < 160 && d[le] != '\n') ++le;
  return {lb, le};
}

// "-", "+" or "~" then an alphanumeric right after a number: a package
// version's revision or suffix ("6.3.1.1-0ubuntu1", "1.2+dfsg", "3.0~rc1"),
// or the rest of an identifier ("1517354021000-1ab2c3").
bool identifier_continues(std::string_view d, size_t e) {
  const char n = at(d, e);
  return (n == '-' || n == '+' || n == '~') && is_alnum(at(d, e + 1));
}
// The same on the left: "S-1-5-21-...", "build-4111...", "1:2.3.4.5".
bool identifier_precedes(std::string_view d, size_t b) {
  const char p = before(d, b);
  return (p == '-' || p == '+' || p == '~' || p == ':' || p == '#' || p == '/') && is_alnum(before2(d, b));
}

}  // namespace

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
  // Leading dots, and the backticks and quotes that mark code or a quotation
  // in prose ("``@decorator.name``", "'jane@example.org'"), are not the address.
  while (lb < atpos && (d[lb] == '.' || d[lb] == '`' || d[lb] == '\'')) ++lb;
  if (lb == atpos || d[atpos - 1] == '.' || atpos - lb > 64) return false;
  bool letter_or_digit = false;  // "``@name.attr``", "**@x.y**": markup, no mailbox
  for (size_t i = lb; i < atpos; ++i) letter_or_digit |= is_alnum(d[i]);
  if (!letter_or_digit) return false;
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
  // Note [message ids]: a Message-ID has an address's syntax but names a
  // message: after a Message-ID / In-Reply-To / References header on its
  // line, in a mid: or news: URL, or in the shapes mailers generate (a
  // timestamp of 8+ digits then '.' or '-', git-send-email's, Gnus' ".fsf",
  // Gmail's "@mail.gmail.com").
  {
    const auto [line_b, line_e] = line_around(d, lb, e);
    const std::string_view left = d.substr(line_b, lb - line_b);
    if (icontains(left, "message-id") || icontains(left, "in-reply-to") || icontains(left, "references:") ||
        icontains(left, "msgid") || icontains(left, "mid:") || icontains(left, "news:"))
      return false;
    const std::string_view local = d.substr(lb, atpos - lb), domain = d.substr(atpos + 1, e - atpos - 1);
    size_t lead_digits = 0;
    while (lead_digits < local.size() && is_digit(local[lead_digits])) ++lead_digits;
    if (lead_digits >= 8 && lead_digits < local.size() && (local[lead_digits] == '.' || local[lead_digits] == '-'))
      return false;
    if (icontains(local, "git-send-email") || (local.size() > 4 && local.substr(local.size() - 4) == ".fsf"))
      return false;
    if (domain.size() >= 14 && ieq_prefix(domain.substr(domain.size() - 14), "mail.gmail.com")) return false;
  }
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

// Note [versions and addresses]: technical text is full of four-part dotted
// numbers that are versions ("Git 1.7.5.2", "Standards-Version: 4.6.2.0",
// "mesa (>= 6.3.1.1-0ubuntu1)"), RCS revisions and section numbers
// ("4.2.1.3"). A dotted quad is no address when
//  - a version marker is the word before it (version, release, revision,
//    section, bump, upgrade, ...), or a package suffix follows it
//    ("-0ubuntu1", "+dfsg", "~rc1"), or
//  - it has a version's shape (first part one digit, second under 30: where
//    releases and sections live, and under 1% of the public IPv4 space),
//    or a marker is up to four words before it, and its line names no
//    network thing (ip, host, server, dns, ...).
bool version_marker(const std::string& w) {
  return one_of(w, {"v", "ver", "ver.", "version", "versions", "standards-version", "release", "released", "releases",
                    "rel", "revision", "rev", "rev.", "r", "tag", "tagged", "bump", "bumped", "upgrade", "upgraded",
                    "update", "updated", "patch", "patched", "prepare", "snapshot", "build", "section", "sections",
                    "sec", "sec.", "\xC2\xA7", "chapter", "clause", "policy", "rfc", "git", "require", "requires",
                    "required", "depends", "needs", ">=", "<=", ">", "<",
                    "~="});
}
// A marker up to four words back ("update V8 to 10.2.154.26", "upgraded to
// 4.6.85.25 from 4.5.103.35"): the words before b on its line.
bool version_marker_near(std::string_view d, size_t b) {
  size_t pos = b;
  for (int k = 0; k < 4 && pos > 0; ++k) {
    const std::string w = word_before(d, pos);
    if (w.empty()) return false;
    if (version_marker(w)) return true;
    // Step over that word and the spaces before it.
    while (pos > 0 && (d[pos - 1] == ' ' || d[pos - 1] == '\t' || d[pos - 1] == '(' || d[pos - 1] == '[')) --pos;
    while (pos > 0 && !is_space(d[pos - 1]) && d[pos - 1] != '(' && d[pos - 1] != '[') --pos;
    if (pos > 0 && d[pos - 1] == '\n') return false;
  }
  return false;
}

bool network_line(std::string_view d, size_t b, size_t e) {
  const auto [lb, le] = line_around(d, b, e);
  return line_has_word(d, lb, le,
                       {"ip", "ips", "ipv4", "ipv6", "addr", "address", "addresses", "host", "hosts", "hostname",
                        "server", "servers", "dns", "resolver", "nameserver", "gateway", "router", "route", "subnet",
                        "netmask", "network", "firewall", "proxy", "ping", "connect", "connected", "connection",
                        "listen", "listening", "bind", "port", "inet", "localhost", "packets", "traffic", "blocked",
                        "banned", "ssh", "tcp", "udp"});
}
}  // namespace

Verdict validate_ipv4(std::string_view d, size_t b, size_t e, bool keep_private) {
  const std::string_view s = d.substr(b, e - b);
  if (!ipv4_valid(s)) return Verdict::kReject;
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '.' || p == '_' || is_alnum(n) || n == '_' || (n == '.' && is_digit(at(d, e + 1))))
    return Verdict::kClaim;  // part of a longer dotted number or identifier (OIDs "1.3.6.1.4.1")
  // After "::" or a hex group and ':', it is the tail of an IPv6 literal (the
  // IPv6 rule decides the whole).
  if (p == ':' && (before2(d, b) == ':' || std::isxdigit(static_cast<unsigned char>(before2(d, b)))))
    return Verdict::kClaim;
  if (identifier_continues(d, e) || identifier_precedes(d, b)) return Verdict::kClaim;
  if (version_marker(word_before(d, b))) return Verdict::kClaim;
  const size_t dot1 = s.find('.');
  const size_t dot2 = s.find('.', dot1 + 1);
  const int second = std::atoi(std::string(s.substr(dot1 + 1, dot2 - dot1 - 1)).c_str());
  const bool version_shape = dot1 == 1 && second < 30;
  if ((version_shape || version_marker_near(d, b)) && !network_line(d, b, e)) return Verdict::kClaim;
  if (keep_private) {
    uint8_t o[4];
    const std::string c(s);
    if (inet_pton(AF_INET, c.c_str(), o) == 1 && ipv4_private(o)) return Verdict::kReject;
  }
  return Verdict::kAccept;
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
  // Non-empty groups ("a::" or "::" alone are not addresses in prose); an
  // embedded IPv4 address is two groups' worth ("::192.0.2.1").
  int groups = c.find('.') != std::string::npos ? 1 : 0;
  for (size_t i = 0; i < c.size();) {
    if (c[i] == ':' || c[i] == '.') {
      ++i;
      continue;
    }
    ++groups;
    while (i < c.size() && c[i] != ':') ++i;
  }
  if (groups < 2) return false;
  // "2:4:6:8:10:12:14:16" (a list), "A::D" (Perl's Algorithm::Diff): an
  // address in prose has a digit, and "::" or a hex letter.
  const bool has_digit = std::any_of(c.begin(), c.end(), [](char x) { return is_digit(x); });
  const bool has_hex_letter = std::any_of(c.begin(), c.end(), [](char x) { return (x | 0x20) >= 'a' && (x | 0x20) <= 'f'; });
  if (!has_digit || (c.find("::") == std::string::npos && !has_hex_letter)) return false;
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

namespace {
// "+YYYYMMDD..." with 12+ digits and no separator: a timestamp or snapshot
// stamp ("+20220202101403" of LLVM's Debian versions), not a number to dial.
bool timestamp_digits(std::string_view digits) {
  if (digits.size() < 12) return false;
  const int year = std::atoi(std::string(digits.substr(0, 4)).c_str());
  const int month = std::atoi(std::string(digits.substr(4, 2)).c_str());
  const int day = std::atoi(std::string(digits.substr(6, 2)).c_str());
  return year >= 1970 && year <= 2099 && month >= 1 && month <= 12 && day >= 1 && day <= 31;
}
}  // namespace

// Note [phone forms]: supported are E.164 with its '+' (7..15 digits, any
// grouping) and NANP (10 digits, or 11 with the leading 1) with separators
// or parentheses. National forms of other countries without '+' ("030
// 901820", "06 12 34 56 78") are not: without the country code they are
// digit groups like any other in technical text (tables, dates, ids), and no
// validator can tell them apart. A bare run of digits is never a phone.
bool validate_phone(std::string_view d, size_t b, size_t e, bool nanp) {
  const std::string_view s = d.substr(b, e - b);
  std::string digits;
  int open = 0, close = 0;
  // The separators between digit groups, each with the number of digits
  // before it (") " and ")-" count as one ')').
  std::vector<std::pair<char, size_t>> seps;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (is_digit(c)) {
      digits.push_back(c);
    } else if (c == '(') {
      ++open;
    } else if (c == ')') {
      ++close;
      seps.emplace_back(')', digits.size());
      if (i + 1 < s.size() && !is_digit(s[i + 1])) ++i;
    } else if (c == ' ' || c == '.' || c == '-') {
      seps.emplace_back(c, digits.size());
    }
  }
  if (open != close || open > 1) return false;
  const bool plus = s[0] == '+';
  if (!plus && seps.empty() && open == 0) return false;  // a bare digit run (ids, counters, timestamps)
  if (nanp) {
    std::string_view national = digits;
    if (national.size() == 11 && national[0] == '1') national.remove_prefix(1);
    if (national.size() != 10 || national[0] < '2' || national[3] < '2') return false;
    // Between area code, exchange and line: one separator kind, or a space
    // then a hyphen ("415 555-2671"), or any after "(415)". A dot mixed with
    // another kind is a clause or standard number ("252.227-7013", DFARS).
    const size_t lead = digits.size() - 10;  // 1 with the country code
    char first = 0, second = 0;
    for (const auto& [c, at_digit] : seps) {
      if (at_digit == lead + 3) first = c;
      if (at_digit == lead + 6) second = c;
    }
    if (first && second && first != ')' && first != second && !(first == ' ' && second == '-')) return false;
  } else {
    if (!plus || digits.size() < 7 || digits.size() > 15) return false;
    if (seps.empty() && timestamp_digits(digits)) return false;
  }
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '_' || p == '/' || p == '+' || p == '~' || (!plus && p == '+')) return false;
  if ((p == '-' || p == '.' || p == ':') && is_alnum(before2(d, b))) return false;
  if (is_alnum(n) || n == '_' || ((n == '-' || n == '.' || n == '/' || n == '+' || n == '~') && is_alnum(at(d, e + 1))))
    return false;
  return !in_isbn_or_doi_context(d, b, e);
}

namespace {
// Note [card networks]: the issuer (IIN) prefixes and lengths of the card
// networks, from the networks' published ranges. A Luhn-valid run of digits
// outside them (epoch-millisecond timestamps "1517354021000", ids) is no card.
bool card_network_valid(std::string_view digits) {
  const size_t n = digits.size();
  auto prefix = [&](size_t len) { return std::atoi(std::string(digits.substr(0, len)).c_str()); };
  const int p1 = prefix(1), p2 = prefix(2), p3 = prefix(3), p4 = prefix(4), p6 = n >= 6 ? prefix(6) : 0;
  if (p1 == 4) return n == 13 || n == 16 || n == 19;                                  // Visa
  if ((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) return n == 16;            // Mastercard
  if (p2 == 34 || p2 == 37) return n == 15;                                            // American Express
  if ((p3 >= 300 && p3 <= 305) || p2 == 36 || p2 == 38 || p2 == 39) return n >= 14 && n <= 19;  // Diners Club
  if (p4 == 6011 || (p3 >= 644 && p3 <= 649) || p2 == 65 || (p6 >= 622126 && p6 <= 622925))
    return n >= 16 && n <= 19;                                                         // Discover
  if (p4 >= 3528 && p4 <= 3589) return n >= 16 && n <= 19;                             // JCB
  if (p2 == 62) return n >= 16 && n <= 19;                                             // UnionPay
  if (p4 >= 2200 && p4 <= 2204) return n == 16;                                        // Mir
  if (p2 == 50 || (p2 >= 56 && p2 <= 58) || p2 == 63 || p2 == 67) return n >= 13 && n <= 19;  // Maestro
  return false;
}

// Printed groupings: none, fours (the last group shorter), or the 4-6-5 and
// 4-6-4 of American Express and Diners Club.
bool card_grouping_valid(std::string_view s, char sep) {
  if (!sep) return true;
  std::vector<size_t> groups;
  size_t g = 0;
  for (char c : s) {
    if (c == sep) {
      groups.push_back(g);
      g = 0;
    } else {
      ++g;
    }
  }
  groups.push_back(g);
  if (groups.size() == 3 && groups[0] == 4 && groups[1] == 6 && (groups[2] == 5 || groups[2] == 4)) return true;
  for (size_t i = 0; i + 1 < groups.size(); ++i)
    if (groups[i] != 4) return false;
  return groups.back() >= 1 && groups.back() <= 4;
}
}  // namespace

namespace {
// Another group of digits right before or after [b, e), separated by one
// space, standing alone: a row of a number table, not one number.
bool in_number_row(std::string_view d, size_t b, size_t e) {
  if (before(d, b) == ' ' && is_digit(before2(d, b))) {
    size_t i = b - 1;
    while (i > 0 && is_digit(d[i - 1])) --i;
    if (i == 0 || is_space(d[i - 1])) return true;
  }
  if (at(d, e) == ' ' && is_digit(at(d, e + 1))) {
    size_t i = e + 1;
    while (i < d.size() && is_digit(d[i])) ++i;
    const char n = at(d, i);
    if (!n || is_space(n) || n == ',' || n == ';' || (n == '.' && !is_digit(at(d, i + 1)))) return true;
  }
  return false;
}
}  // namespace

bool validate_card(std::string_view d, size_t& b, size_t e) {
  const char n = at(d, e);
  if (is_alnum(n) || n == '_' || identifier_continues(d, e) || (n == '.' && is_digit(at(d, e + 1)))) return false;
  // The scan reports the leftmost start; a card may begin at a later group
  // ("ref 12 4111 1111 1111 1111"), so later group starts are tried too.
  for (size_t start = b; start < e;) {
    const std::string_view s = d.substr(start, e - start);
    std::string digits;
    char sep = 0;
    bool mixed = false;
    for (char c : s) {
      if (is_digit(c)) digits.push_back(c);
      else if (sep && c != sep) mixed = true;
      else sep = c;
    }
    if (digits.size() < 13) return false;
    const char p = before(d, start);
    if (!mixed && digits.size() <= 19 && !is_alnum(p) && p != '_' && p != '.' && !identifier_precedes(d, start) &&
        !(sep == ' ' && in_number_row(d, start, e)) && card_network_valid(digits) && card_grouping_valid(s, sep) &&
        luhn_valid(s) && !in_isbn_or_doi_context(d, start, e)) {
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
  const char sep = d[b + 3];
  const char p = before(d, b), n = at(d, e);
  if (is_alnum(p) || p == '_' || ((p == '-' || p == '.' || p == ':' || p == '/') && is_alnum(before2(d, b)))) return false;
  if (is_alnum(n) || n == '_' || ((n == '-' || n == '.' || n == '/' || n == ':') && is_alnum(at(d, e + 1)))) return false;
  // Space-separated: not a row of a number table (another number right
  // before or after it on the line).
  if (sep == ' ' && ((p == ' ' && is_digit(before2(d, b))) || (n == ' ' && is_digit(at(d, e + 1))))) return false;
  return !in_isbn_or_doi_context(d, b, e);
}

Verdict validate_iban(std::string_view d, size_t b, size_t e) {
  const std::string_view s = d.substr(b, e - b);
  const size_t sp = s.find_first_of(" -");
  if (sp != std::string_view::npos) {  // printed form: groups of four, one separator kind
    const char sep = s[sp];
    size_t group = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == ' ' || s[i] == '-') {
        if (s[i] != sep || group != 4) return Verdict::kReject;
        group = 0;
      } else {
        ++group;
      }
    }
    if (group == 0 || group > 4) return Verdict::kReject;
  }
  if (is_alnum(before(d, b)) || is_alnum(at(d, e)) || identifier_continues(d, e)) return Verdict::kReject;
  if (iban_valid(s)) return Verdict::kAccept;
  // An IBAN's shape (a registered country, its length) with a wrong check:
  // a mistyped or example IBAN. Its digit groups are no card or phone.
  std::string compact;
  for (char c : s)
    if (c != ' ' && c != '-') compact.push_back(c);
  return iban_length(compact[0], compact[1]) == static_cast<int>(compact.size()) ? Verdict::kClaim : Verdict::kReject;
}

bool validate_token(std::string_view d, size_t b, size_t e) {
  const char p = before(d, b), n = at(d, e);
  return !(is_alnum(p) || p == '_' || is_alnum(n) || n == '_' || n == '-');
}

}  // namespace pii
}  // namespace luminamoon
