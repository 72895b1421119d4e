// The quality metrics of one document, in a linear number of passes.
#include <algorithm>
#include <cctype>
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

struct Word {
  uint32_t begin, end;  // byte range
  uint32_t length;      // code points
};

inline uint64_t mix(uint64_t a, uint64_t b) {
  // Order-dependent combination of two uniform 64-bit hashes (n-gram chaining).
  uint64_t x = (a ^ 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 31)) + b;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

bool is_stop_word(const uint8_t* s, size_t n) {
  auto punct = [](uint8_t c) { return c < 0x80 && std::ispunct(c); };
  size_t b = 0, e = n;
  while (b < e && punct(s[b])) ++b;
  while (e > b && punct(s[e - 1])) --e;
  const size_t len = e - b;
  if (len < 2 || len > 4) return false;
  char w[4];
  for (size_t i = 0; i < len; ++i) {
    const uint8_t c = s[b + i];
    w[i] = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  }
  const std::string_view v(w, len);
  return v == "the" || v == "be" || v == "to" || v == "of" || v == "and" || v == "that" || v == "have" ||
         v == "with";
}

struct Scratch {
  std::vector<uint32_t> cp_counts = std::vector<uint32_t>(0x110000, 0);
  std::vector<uint32_t> touched;
  std::vector<Word> words;
  std::vector<uint64_t> word_hash, gram_hash, prev_hash;
  std::vector<uint32_t> gram_count;
  std::vector<uint64_t> char_prefix;
  std::vector<uint8_t> candidate;
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

QualityMetrics compute_quality_metrics(std::string_view text) {
  thread_local Scratch sc;
  QualityMetrics m{};
  if (!is_valid_utf8(text)) {  // metrics are defined on code points: decode the standard's way
    sc.fixed.clear();
    replace_invalid_utf8(text, sc.fixed);
    text = sc.fixed;
  }
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  auto M = [&](QualityMetric k) -> double& { return m[static_cast<size_t>(k)]; };

  // One pass over code points: entropy counts, words, lines, symbols.
  uint64_t total_cp = 0, hashes = 0, ellipses = 0, dot_run = 0;
  uint64_t alpha_words = 0, stop_words = 0;
  uint64_t lines = 1, bullet_lines = 0, ellipsis_lines = 0;
  sc.words.clear();
  bool in_word = false, word_alpha = false, line_started = false, gap = false;
  uint32_t word_begin = 0, word_len = 0;
  // The last non-White_Space code point of the line (and the two before it,
  // for "..."), to test "ends with an ellipsis" at the newline.
  uint32_t last1 = 0, last2 = 0, last3 = 0;
  auto end_line = [&] {
    if ((last1 == '.' && last2 == '.' && last3 == '.') || last1 == kEllipsis) ++ellipsis_lines;
    last1 = last2 = last3 = 0;
    line_started = false;
    gap = false;
  };
  auto end_word = [&](size_t at) {
    sc.words.push_back({word_begin, static_cast<uint32_t>(at), word_len});
    alpha_words += word_alpha;
    stop_words += is_stop_word(s + word_begin, at - word_begin);
    in_word = false;
  };
  size_t i = 0;
  while (i < n) {
    const size_t at = i;
    const uint32_t cp = unicode::next_code_point(s, i);
    ++total_cp;
    if (cp < 0x80) {
      ++sc.cp_counts[cp];  // ASCII slots are always "touched" (reset below)
    } else if (sc.cp_counts[cp]++ == 0) {
      sc.touched.push_back(cp);
    }
    if (cp == '.') {
      ++dot_run;
    } else {
      ellipses += dot_run / 3;
      dot_run = 0;
    }
    hashes += cp == '#';
    ellipses += cp == kEllipsis;
    const bool ws = unicode::is_white_space(cp);
    if (ws) {
      if (in_word) end_word(at);
      gap = true;
    } else {
      if (!in_word) {
        in_word = true;
        word_alpha = false;
        word_begin = static_cast<uint32_t>(at);
        word_len = 0;
      }
      ++word_len;
      word_alpha = word_alpha || unicode::is_alphabetic(cp);
      if (!line_started) {
        line_started = true;
        bullet_lines += cp == kBullet || cp == '-' || cp == '*';
      }
      // the tail of the line with trailing White_Space removed, up to 3 code points
      if (gap) {
        last3 = last2 = 0;
      } else {
        last3 = last2;
        last2 = last1;
      }
      last1 = cp;
      gap = false;
    }
    if (cp == '\n') {
      end_line();
      ++lines;
    }
  }
  if (in_word) end_word(n);
  ellipses += dot_run / 3;
  end_line();

  // Entropy from the counts, then reset only what was touched.
  double sum_clogc = 0.0;
  auto take = [&](uint32_t cp) {
    const uint32_t c = sc.cp_counts[cp];
    if (c) sum_clogc += double(c) * std::log2(double(c));
    sc.cp_counts[cp] = 0;
  };
  for (uint32_t cp = 0; cp < 0x80; ++cp) take(cp);
  for (uint32_t cp : sc.touched) take(cp);
  sc.touched.clear();
  M(QualityMetric::kEntropy) = total_cp ? std::log2(double(total_cp)) - sum_clogc / double(total_cp) : 0.0;
  if (M(QualityMetric::kEntropy) < 0) M(QualityMetric::kEntropy) = 0.0;  // -0.0 and rounding

  const size_t W = sc.words.size();
  uint64_t word_chars = 0;
  for (const Word& w : sc.words) word_chars += w.length;
  M(QualityMetric::kWordCount) = double(W);
  M(QualityMetric::kMeanWordLength) = W ? double(word_chars) / double(W) : 0.0;
  M(QualityMetric::kSymbolWordRatio) = W ? double(hashes + ellipses) / double(W) : 0.0;
  M(QualityMetric::kBulletLineFrac) = double(bullet_lines) / double(lines);
  M(QualityMetric::kEllipsisLineFrac) = double(ellipsis_lines) / double(lines);
  M(QualityMetric::kAlphaWordFrac) = W ? double(alpha_words) / double(W) : 0.0;
  M(QualityMetric::kStopWordCount) = double(stop_words);

  // Duplicate lines and paragraphs.
  std::vector<std::pair<size_t, size_t>> segs;
  {
    size_t b = 0;
    for (size_t k = 0; k <= n; ++k) {
      if (k == n || s[k] == '\n') {
        if (k > b) segs.emplace_back(b, k);
        b = k + 1;
      }
    }
    uint64_t chars = 0;
    count_duplicates(s, segs, sc.counter, &M(QualityMetric::kDupLineFrac), &chars);
    M(QualityMetric::kDupLineCharFrac) = total_cp ? double(chars) / double(total_cp) : 0.0;
    segs.clear();
    b = 0;
    size_t k = 0;
    while (k <= n) {
      if (k < n && s[k] == '\n' && k + 1 < n && s[k + 1] == '\n') {
        if (k > b) segs.emplace_back(b, k);
        while (k < n && s[k] == '\n') ++k;
        b = k;
        continue;
      }
      if (k == n && k > b) segs.emplace_back(b, k);
      ++k;
    }
    count_duplicates(s, segs, sc.counter, &M(QualityMetric::kDupParaFrac), &chars);
    M(QualityMetric::kDupParaCharFrac) = total_cp ? double(chars) / double(total_cp) : 0.0;
  }

  // n-grams. Note [n-gram candidates]: an n-gram occurring twice has an
  // (n-1)-gram prefix occurring twice, so the n-grams are only counted at
  // positions whose (n-1)-gram repeats; the rest occur once. Each n costs
  // O(candidates), and only the 2-grams need a pass over every word.
  sc.word_hash.resize(W);
  sc.char_prefix.assign(W + 1, 0);
  for (size_t k = 0; k < W; ++k) {
    const Word& w = sc.words[k];
    sc.word_hash[k] = XXH3_64bits(s + w.begin, w.end - w.begin);
    sc.char_prefix[k + 1] = sc.char_prefix[k] + w.length;
  }
  sc.gram_hash = sc.word_hash;        // 1-grams
  sc.gram_count.assign(W, 2);         // every position is a candidate for 2-grams
  std::vector<uint32_t> cand, starts;
  for (size_t gram = 2; gram <= 10; ++gram) {
    double* out = gram <= 4 ? &M(static_cast<QualityMetric>(size_t(QualityMetric::kTop2gramCharFrac) + gram - 2))
                            : &M(static_cast<QualityMetric>(size_t(QualityMetric::kDup5gramCharFrac) + gram - 5));
    *out = 0.0;
    cand.clear();
    if (W >= gram)
      for (uint32_t p = 0; p + gram <= W; ++p)
        if (sc.gram_count[p] >= 2) cand.push_back(p);
    sc.counter.reset(cand.size());
    for (uint32_t p : cand) {
      sc.gram_hash[p] = mix(sc.gram_hash[p], sc.word_hash[p + gram - 1]);
      sc.counter.add(sc.gram_hash[p]);
    }
    uint32_t best = 0;
    int64_t best_pos = -1;
    std::fill(sc.gram_count.begin(), sc.gram_count.end(), 0);
    for (uint32_t p : cand) {
      const uint32_t c = sc.counter.count(sc.gram_hash[p]);
      sc.gram_count[p] = c;
      if (c > best) {
        best = c;
        best_pos = p;
      }
    }
    if (best < 2 || word_chars == 0) {
      if (best < 2) break;  // no repeated n-gram: none for larger n either
      continue;
    }
    starts.clear();
    if (gram <= 4) {
      const uint64_t target = sc.gram_hash[static_cast<size_t>(best_pos)];
      for (uint32_t p : cand)
        if (sc.gram_count[p] >= 2 && sc.gram_hash[p] == target) starts.push_back(p);
    } else {
      for (uint32_t p : cand)
        if (sc.gram_count[p] >= 2) starts.push_back(p);
    }
    *out = double(covered_chars(starts, gram, sc.char_prefix)) / double(word_chars);
  }
  return m;
}

}  // namespace luminamoon
