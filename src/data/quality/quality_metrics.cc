// The quality metrics of one document, in a linear number of passes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data/common/unicode.h"
#include "data/quality/ngram_counter.h"
#include "luminamoon/quality_filter.h"
#include "luminamoon/text_cleaner.h"

namespace luminamoon {

// Note [quality metrics]: the definitions, restated by the independent
// Python reference in tests/test_quality.py.
//  - entropy: -sum p log2 p over the code point distribution of the document.
//  - words: maximal runs of code points outside Unicode White_Space. A word's
//    length is its number of code points.
//  - symbol_word_ratio: (occurrences of '#' + non-overlapping occurrences of
//    "..." + occurrences of U+2026) / words (Python's str.count semantics).
//  - lines: text.split("\n") (empty lines included) for the bullet and
//    ellipsis fractions. A bullet line's first non-White_Space code point is
//    U+2022, '-' or '*'; an ellipsis line ends, after trailing White_Space,
//    with "..." or U+2026.
//  - alpha_word_frac: words holding a code point of Note [alphabetic].
//  - stop_word_count: words that, with leading/trailing ASCII punctuation
//    removed and ASCII lower-cased, are one of: the be to of and that have with.
//  - duplicate lines: the non-empty segments of text.split("\n"); duplicate
//    paragraphs: the non-empty segments of re.split("\n{2,}", text). An
//    element equal to an earlier one is a duplicate; *_frac = duplicates /
//    elements, *_char_frac = code points of duplicates / code points of text.
//  - n-grams are over the word list. top_n: the n-gram with the highest count
//    (ties: the one occurring first); if that count >= 2, the words covered by
//    any of its occurrences count once each. dup_n: the words covered by any
//    occurrence of any n-gram occurring >= 2 times, counted once each. Both
//    divide those words' code points by the code points of all words.
//  - a ratio with a zero denominator is 0.

namespace {

constexpr uint32_t kBullet = 0x2022, kEllipsis = 0x2026;

// Hash of a word: words of up to 8 bytes (most) are packed and mixed with
// their length; longer ones go through XXH3.
// `readable` is how many bytes may be read from p (at least n).
inline uint64_t word_hash(const uint8_t* p, size_t n, size_t readable) {
  if (n > 8) return XXH3_64bits(p, n);
  uint64_t v = 0;
  if (std::endian::native == std::endian::little && readable >= 8) {  // one load, the bytes past the word masked off
    std::memcpy(&v, p, 8);
    v &= n == 8 ? ~0ull : (1ull << (8 * n)) - 1;
  } else {
    std::memcpy(&v, p, n);
  }
  v ^= uint64_t(n) << 59;
  v *= 0x9E3779B97F4A7C15ull;
  v ^= v >> 32;
  v *= 0xD6E8FEB86659FD93ull;
  return v ^ (v >> 29);
}

inline uint64_t mix(uint64_t a, uint64_t b) {
  // Order-dependent combination of two uniform 64-bit hashes (n-gram chaining).
  uint64_t x = (a ^ 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 31)) + b;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

bool is_stop_word(const uint8_t* s, size_t n) {
  auto punct = [](uint8_t c) {  // Python's string.punctuation
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  };
  size_t b = 0, e = n;
  while (b < e && punct(s[b])) ++b;
  while (e > b && punct(s[e - 1])) --e;
  const size_t len = e - b;
  if (len < 2 || len > 4) return false;
  // The word ASCII-lower-cased and packed little-endian into 32 bits.
  uint32_t w = 0;
  for (size_t i = 0; i < len; ++i) {
    const uint8_t c = s[b + i];
    w |= uint32_t(c >= 'A' && c <= 'Z' ? c + 32 : c) << (8 * i);
  }
  constexpr auto pack = [](const char* t) {
    uint32_t v = 0;
    for (int i = 0; t[i]; ++i) v |= uint32_t(uint8_t(t[i])) << (8 * i);
    return v;
  };
  constexpr uint32_t kStop[] = {pack("the"), pack("be"), pack("to"), pack("of"),
                                pack("and"), pack("that"), pack("have"), pack("with")};
  for (uint32_t k : kStop)
    if (w == k) return true;
  return false;
}

// is_stop_word for a word whose first and last bytes are ASCII letters
// (nothing to strip). `readable`: bytes that may be read from s (>= n).
// OR-ing 0x20 lower-cases letters and maps no other byte onto a lower-case
// letter, so the comparison with the all-letter stop words stays exact.
inline bool is_plain_stop_word(const uint8_t* s, size_t n, size_t readable) {
  uint32_t x = 0;
  if (readable >= 4) {
    std::memcpy(&x, s, 4);
  } else {
    std::memcpy(&x, s, readable);
  }
  const uint32_t keep = n >= 4 ? ~0u : (1u << (8 * n)) - 1;
  const uint32_t w = (x | 0x20202020u) & keep;
  constexpr auto pack = [](const char* t) {
    uint32_t v = 0;
    for (int i = 0; t[i]; ++i) v |= uint32_t(uint8_t(t[i])) << (8 * i);
    return v;
  };
  const bool hit = (w == pack("the")) | (w == pack("be")) | (w == pack("to")) | (w == pack("of")) |
                   (w == pack("and")) | (w == pack("that")) | (w == pack("have")) | (w == pack("with"));
  return hit & (n >= 2) & (n <= 4);
}

// c * log2(c), from a table for the small counts that nearly every document
// has (the table holds the very values the expression computes, so the
// entropy is bit-for-bit the same; a log2 call per distinct code point per
// document was a visible share of the metrics' time).
inline double c_log2_c(uint64_t c) {
  constexpr size_t kTable = 4096;
  static const std::vector<double> table = [] {
    std::vector<double> t(kTable);
    for (size_t i = 1; i < kTable; ++i) t[i] = double(i) * std::log2(double(i));
    return t;
  }();
  return c < kTable ? table[c] : double(c) * std::log2(double(c));
}

struct Scratch {
  std::vector<uint32_t> cp_counts = std::vector<uint32_t>(0x110000, 0);
  std::vector<uint32_t> touched;
  std::vector<uint64_t> word_hash, gram_hash, prev_hash;
  std::vector<uint32_t> gram_count, slot, cand, covered;
  std::vector<uint64_t> char_prefix;
  std::vector<std::pair<size_t, size_t>> segments;
  std::vector<uint64_t> starts, ends;
  std::vector<uint8_t> white;
  detail::NgramCounter counter;
  std::string fixed;
};

// Code points of the words covered by the occurrences at `starts` (ascending),
// each n words long, each word counted once.
uint64_t covered_chars(const std::vector<uint32_t>& starts, size_t n, const std::vector<uint64_t>& prefix) {
  uint64_t total = 0;
  size_t covered_until = 0;
  for (uint32_t j : starts) {
    const size_t from = std::max<size_t>(j, covered_until), to = j + n;
    if (to > from) total += prefix[to] - prefix[from];
    covered_until = std::max(covered_until, to);
  }
  return total;
}

// Duplicates among segments [begin, end) of text: (count, code points).
template <class Segments>
void count_duplicates(const uint8_t* s, const Segments& segs, detail::NgramCounter& counter, double* dup_frac,
                      uint64_t* dup_chars) {
  counter.reset(segs.size());
  size_t dups = 0;
  uint64_t chars = 0;
  for (const auto& [b, e] : segs) {
    const uint64_t h = XXH3_64bits(s + b, e - b);
    const bool seen = counter.count(h) != 0;
    counter.add(h);
    if (seen) {
      ++dups;
      chars += unicode::count_code_points(s + b, e - b);
    }
  }
  *dup_frac = segs.empty() ? 0.0 : double(dups) / double(segs.size());
  *dup_chars = chars;
}

}  // namespace

namespace {

// Byte classes of ASCII for the word and line scans.
struct AsciiClasses {
  uint8_t white[256] = {};  // non-ASCII bytes: 0 (see Note [branch-free words])
  bool alpha[128] = {};
  constexpr AsciiClasses() {
    for (int c = 0; c < 128; ++c) {
      white[c] = c == ' ' || (c >= 0x09 && c <= 0x0D);
      alpha[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
  }
};
constexpr AsciiClasses kAscii;

// Start of the code point that ends just before s[e] (valid UTF-8, e > 0).
inline size_t cp_start_before(const uint8_t* s, size_t e) {
  size_t i = e - 1;
  while ((s[i] & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

QualityMetrics compute_quality_metrics(std::string_view text) {
  thread_local Scratch tls;
  Scratch& sc = tls;  // one TLS lookup, not one per use
  QualityMetrics m{};
  if (!is_valid_utf8(text)) {  // metrics are defined on code points: decode the standard's way
    sc.fixed.clear();
    replace_invalid_utf8(text, sc.fixed);
    text = sc.fixed;
  }
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  auto M = [&](QualityMetric k) -> double& { return m[static_cast<size_t>(k)]; };

  // Pass 1: byte histogram (four tables, so that runs of one byte do not
  // serialize on one counter), then the non-ASCII code points.
  uint32_t hist[4][256] = {};
  {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      ++hist[0][s[i]];
      ++hist[1][s[i + 1]];
      ++hist[2][s[i + 2]];
      ++hist[3][s[i + 3]];
    }
    for (; i < n; ++i) ++hist[0][s[i]];
  }
  uint64_t byte_count[256];
  uint64_t continuation = 0, non_ascii = 0;
  for (int b = 0; b < 256; ++b) {
    byte_count[b] = uint64_t(hist[0][b]) + hist[1][b] + hist[2][b] + hist[3][b];
    if (b >= 0x80) non_ascii += byte_count[b];
    if (b >= 0x80 && b < 0xC0) continuation += byte_count[b];
  }
  const uint64_t total_cp = n - continuation;
  double sum_clogc = 0.0;
  for (int b = 0; b < 0x80; ++b)
    if (byte_count[b]) sum_clogc += c_log2_c(byte_count[b]);
  uint64_t ellipsis_chars = 0;
  if (non_ascii) {
    for (size_t i = 0; i < n;) {
      if (s[i] < 0x80) {
        ++i;
        // Skip ASCII eight bytes at a time (no high bit in the word).
        while (i + 8 <= n) {
          uint64_t w;
          std::memcpy(&w, s + i, 8);
          if (w & 0x8080808080808080ull) break;
          i += 8;
        }
        continue;
      }
      const uint32_t cp = unicode::next_code_point(s, i);
      if (sc.cp_counts[cp]++ == 0) sc.touched.push_back(cp);
    }
    ellipsis_chars = sc.cp_counts[kEllipsis];
    for (uint32_t cp : sc.touched) {
      sum_clogc += c_log2_c(sc.cp_counts[cp]);
      sc.cp_counts[cp] = 0;
    }
    sc.touched.clear();
  }
  M(QualityMetric::kEntropy) = total_cp ? std::max(0.0, std::log2(double(total_cp)) - sum_clogc / double(total_cp)) : 0.0;
  // Non-overlapping "..." (Python's str.count): floor(run / 3) per run of dots.
  uint64_t dot_triples = 0;
  if (byte_count['.'] >= 3) {
    const uint8_t* p = s;
    const uint8_t* end = s + n;
    while ((p = static_cast<const uint8_t*>(std::memchr(p, '.', static_cast<size_t>(end - p))))) {
      const uint8_t* q = p;
      while (q < end && *q == '.') ++q;
      dot_triples += static_cast<uint64_t>(q - p) / 3;
      p = q;
    }
  }

  // Pass 2: words (maximal runs outside White_Space).
  size_t W = 0;  // words
  uint64_t alpha_words = 0, stop_words = 0;
  {
    // Note [branch-free words]: the word boundaries are found without a
    // branch per byte (a mispredicted branch at every word edge cost more
    // than the rest of the metrics). First one White_Space flag per byte:
    // ASCII by table, and the few multi-byte White_Space code points (their
    // lead bytes are C2, E1, E2, E3) mark all their bytes. Then the edges
    // come from bit masks of 64 flags at a time (below), one step per word.
    // The flags are padded with White_Space past the text to whole 64-byte
    // blocks covering [0, n], so that the last word ends inside a block.
    const size_t padded = (n / 64 + 1) * 64;
    sc.white.resize(padded);
    uint8_t* white = sc.white.data();
    for (size_t i = 0; i < n; ++i) {  // arithmetic, so that it vectorizes
      const uint8_t c = s[i];
      white[i] = (c == 0x20) | (static_cast<uint8_t>(c - 0x09) < 5);
    }
    std::memset(white + n, 1, padded - n);
    for (const uint8_t lead : {0xC2, 0xE1, 0xE2, 0xE3}) {
      if (!byte_count[lead]) continue;
      for (const uint8_t* p = s; (p = static_cast<const uint8_t*>(std::memchr(p, lead, static_cast<size_t>(s + n - p))));) {
        size_t j = static_cast<size_t>(p - s);
        const size_t at = j;
        if (unicode::is_white_space(unicode::next_code_point(s, j))) std::memset(white + at, 1, j - at);
        p = s + j;
      }
    }
    // Each edge stores its byte index (low half) and code point index (high
    // half: the byte index minus the continuation bytes before it) in one
    // word, so a word's length needs no second pass. The edges of a 64-byte
    // block come from bit masks (a word start is a non-White_Space byte after
    // a White_Space one), so the work is per word, not per byte.
    sc.starts.resize(n / 2 + 2);
    sc.ends.resize(n / 2 + 2);
    uint64_t* starts = sc.starts.data();
    uint64_t* ends = sc.ends.data();
    size_t ks = 0, ke = 0;
    uint64_t prev_top = 1;  // the text starts after White_Space
    uint64_t cont_before = 0;
    constexpr uint64_t kGather = 0x0102040810204080ull;  // bit 0 of byte k -> bit 56 + k
    constexpr uint64_t kHigh = 0x8080808080808080ull;
    for (size_t base = 0; base < padded; base += 64) {
      uint64_t wm = 0, cm = 0;
      for (int j = 0; j < 8; ++j) {
        uint64_t x;
        std::memcpy(&x, white + base + 8 * j, 8);
        wm |= ((x * kGather) >> 56) << (8 * j);
      }
      if (non_ascii) {  // continuation bytes 10xxxxxx
        const uint8_t* src = s + base;
        uint8_t tail[64];
        if (base + 64 > n) {
          std::memset(tail, 0, sizeof tail);
          if (n > base) std::memcpy(tail, s + base, n - base);
          src = tail;
        }
        for (int j = 0; j < 8; ++j) {
          uint64_t x;
          std::memcpy(&x, src + 8 * j, 8);
          const uint64_t c = x & ~(x << 1) & kHigh;
          cm |= (((c >> 7) * kGather) >> 56) << (8 * j);
        }
      }
      const uint64_t prev = (wm << 1) | prev_top;  // bit i: byte i - 1 is White_Space
      prev_top = wm >> 63;
      for (uint64_t m = ~wm & prev; m; m &= m - 1) {
        const int bit = std::countr_zero(m);
        const uint64_t i = base + bit;
        const uint64_t cont = cont_before + (cm ? std::popcount(cm & ((1ull << bit) - 1)) : 0);
        starts[ks++] = i | ((i - cont) << 32);
      }
      for (uint64_t m = wm & ~prev; m; m &= m - 1) {
        const int bit = std::countr_zero(m);
        const uint64_t i = base + bit;
        const uint64_t cont = cont_before + (cm ? std::popcount(cm & ((1ull << bit) - 1)) : 0);
        ends[ke++] = i | ((i - cont) << 32);
      }
      if (cm) cont_before += std::popcount(cm);
    }
    W = ks;
    // The word hashes and the code point prefix sums of the n-grams below
    // are taken in the same loop (one pass over the words).
    sc.word_hash.resize(ks);
    sc.char_prefix.resize(ks + 1);
    sc.char_prefix[0] = 0;
    for (size_t k = 0; k < ks; ++k) {
      const size_t b = starts[k] & 0xFFFFFFFFu, e = ends[k] & 0xFFFFFFFFu;
      bool alpha = s[b] < 0x80 && kAscii.alpha[s[b]];
      if (!alpha) {
        if (non_ascii) {
          for (size_t j = b; !alpha && j < e;) alpha = unicode::is_alphabetic(unicode::next_code_point(s, j));
        } else {
          for (size_t j = b + 1; !alpha && j < e; ++j) alpha = kAscii.alpha[s[j]];
        }
      }
      const uint32_t length = static_cast<uint32_t>((ends[k] >> 32) - (starts[k] >> 32));
      sc.word_hash[k] = word_hash(s + b, e - b, n - b);
      sc.char_prefix[k + 1] = sc.char_prefix[k] + length;
      alpha_words += alpha;
      // A stop word is 2..4 letters plus ASCII punctuation around it. Most
      // words begin and end with a letter (nothing to strip): those are
      // matched without a branch on their length (is_stop_word's loops
      // mispredicted at every word); the others take is_stop_word.
      const size_t len = e - b;
      if (kAscii.alpha[s[b] & 0x7F] && kAscii.alpha[s[e - 1] & 0x7F]) {
        stop_words += is_plain_stop_word(s + b, len, n - b);
      } else if (len <= 40) {
        stop_words += is_stop_word(s + b, len);
      }
    }
  }

  // Pass 3: lines (bullets, ellipses), found with memchr.
  uint64_t lines = 0, bullet_lines = 0, ellipsis_lines = 0;
  std::vector<std::pair<size_t, size_t>>& segs = sc.segments;
  segs.clear();
  for (size_t lb = 0;;) {
    const void* nl = std::memchr(s + lb, '\n', n - lb);
    const size_t le = nl ? static_cast<size_t>(static_cast<const uint8_t*>(nl) - s) : n;
    ++lines;
    if (le > lb) segs.emplace_back(lb, le);
    size_t f = lb;  // first non-White_Space code point
    while (f < le) {
      if (s[f] < 0x80) {
        if (!kAscii.white[s[f]]) break;
        ++f;
      } else {
        size_t j = f;
        if (!unicode::is_white_space(unicode::next_code_point(s, j))) break;
        f = j;
      }
    }
    if (f < le && (s[f] == '-' || s[f] == '*' || (s[f] == 0xE2 && f + 3 <= le && s[f + 1] == 0x80 && s[f + 2] == 0xA2)))
      ++bullet_lines;
    size_t t = le;  // end of the line without trailing White_Space
    while (t > f) {
      if (s[t - 1] < 0x80) {
        if (!kAscii.white[s[t - 1]]) break;
        --t;
      } else {
        const size_t c = cp_start_before(s, t);
        size_t j = c;
        if (!unicode::is_white_space(unicode::next_code_point(s, j))) break;
        t = c;
      }
    }
    if ((t - f >= 3 && s[t - 1] == '.' && s[t - 2] == '.' && s[t - 3] == '.') ||
        (t - f >= 3 && s[t - 3] == 0xE2 && s[t - 2] == 0x80 && s[t - 1] == 0xA6))
      ++ellipsis_lines;
    if (!nl) break;
    lb = le + 1;
  }

  uint64_t word_chars = 0;
  word_chars = sc.char_prefix[W];
  M(QualityMetric::kWordCount) = double(W);
  M(QualityMetric::kMeanWordLength) = W ? double(word_chars) / double(W) : 0.0;
  M(QualityMetric::kSymbolWordRatio) = W ? double(byte_count['#'] + dot_triples + ellipsis_chars) / double(W) : 0.0;
  M(QualityMetric::kBulletLineFrac) = double(bullet_lines) / double(lines);
  M(QualityMetric::kEllipsisLineFrac) = double(ellipsis_lines) / double(lines);
  M(QualityMetric::kAlphaWordFrac) = W ? double(alpha_words) / double(W) : 0.0;
  M(QualityMetric::kStopWordCount) = double(stop_words);

  // Duplicate lines (the non-empty segments above) and paragraphs (the
  // non-empty segments between runs of two or more "\n").
  {
    uint64_t chars = 0;
    count_duplicates(s, segs, sc.counter, &M(QualityMetric::kDupLineFrac), &chars);
    M(QualityMetric::kDupLineCharFrac) = total_cp ? double(chars) / double(total_cp) : 0.0;
    segs.clear();
    size_t b = 0, k = 0;
    while (k < n) {
      const void* nl = std::memchr(s + k, '\n', n - k);
      if (!nl) break;
      k = static_cast<size_t>(static_cast<const uint8_t*>(nl) - s);
      if (k + 1 < n && s[k + 1] == '\n') {
        if (k > b) segs.emplace_back(b, k);
        while (k < n && s[k] == '\n') ++k;
        b = k;
      } else {
        ++k;
      }
    }
    if (n > b) segs.emplace_back(b, n);
    count_duplicates(s, segs, sc.counter, &M(QualityMetric::kDupParaFrac), &chars);
    M(QualityMetric::kDupParaCharFrac) = total_cp ? double(chars) / double(total_cp) : 0.0;
  }

  // n-grams. Note [n-gram candidates]: an n-gram occurring twice has an
  // (n-1)-gram prefix occurring twice, so the n-grams are only counted at
  // positions whose (n-1)-gram repeats; the rest occur once. The candidates
  // of n + 1 are filtered from those of n, so each n costs O(candidates) and
  // only the 2-grams need a pass over every word. An n-gram's hash extends
  // its (n-1)-gram's hash by one word hash: no word is hashed twice.
  sc.gram_hash.assign(sc.word_hash.begin(), sc.word_hash.end());  // 1-grams
  std::vector<uint32_t>& cand = sc.cand;
  std::vector<uint32_t>& starts = sc.covered;
  cand.resize(W >= 2 ? W - 1 : 0);  // every position is a candidate for 2-grams
  for (uint32_t p = 0; p < cand.size(); ++p) cand[p] = p;
  for (size_t gram = 2; gram <= 10 && !cand.empty(); ++gram) {
    double* out = gram <= 4 ? &M(static_cast<QualityMetric>(size_t(QualityMetric::kTop2gramCharFrac) + gram - 2))
                            : &M(static_cast<QualityMetric>(size_t(QualityMetric::kDup5gramCharFrac) + gram - 5));
    sc.counter.reset(cand.size());
    sc.slot.resize(cand.size());
    uint64_t* gram_hash = sc.gram_hash.data();
    const uint64_t* whash = sc.word_hash.data();
    for (size_t k = 0; k < cand.size(); ++k) {
      const uint32_t p = cand[k];
      gram_hash[p] = mix(gram_hash[p], whash[p + gram - 1]);
      sc.slot[k] = static_cast<uint32_t>(sc.counter.add(gram_hash[p]));
    }
    uint32_t best = 0;
    int64_t best_pos = -1;
    sc.gram_count.resize(cand.size());
    for (size_t k = 0; k < cand.size(); ++k) {
      const uint32_t c = sc.counter.count_at(sc.slot[k]);
      sc.gram_count[k] = c;
      if (c > best) {
        best = c;
        best_pos = cand[k];
      }
    }
    if (best < 2) break;  // no repeated n-gram: none for larger n either
    if (word_chars != 0) {
      starts.clear();
      if (gram <= 4) {
        const uint64_t target = gram_hash[static_cast<size_t>(best_pos)];
        for (size_t k = 0; k < cand.size(); ++k)
          if (sc.gram_count[k] >= 2 && gram_hash[cand[k]] == target) starts.push_back(cand[k]);
      } else {
        for (size_t k = 0; k < cand.size(); ++k)
          if (sc.gram_count[k] >= 2) starts.push_back(cand[k]);
      }
      *out = double(covered_chars(starts, gram, sc.char_prefix)) / double(word_chars);
    }
    // The candidates of gram + 1: repeated here, and room for one more word.
    size_t kept = 0;
    for (size_t k = 0; k < cand.size(); ++k)
      if (sc.gram_count[k] >= 2 && cand[k] + gram + 1 <= W) cand[kept++] = cand[k];
    cand.resize(kept);
  }
  return m;
}

}  // namespace luminamoon
