// The quality metrics of one document: the counts come from the kernel
// (quality_kernel.cc, linear time), the ratios and the entropy from here.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/quality/quality_kernel.h"
#include "luminamoon/quality_filter.h"
#include "luminamoon/text_cleaner.h"

namespace luminamoon {

// Note [quality metrics]: the definitions, restated by the independent
// Python reference in tests/data/test_quality.py.
//  - entropy: -sum p log2 p over the code point distribution of the document.
//  - words: maximal runs of code points outside Unicode White_Space. A word's
//    length is its number of code points.
//  - hash_word_ratio: occurrences of '#' / words; ellipsis_word_ratio:
//    (non-overlapping occurrences of "..." + occurrences of U+2026) / words
//    (Python's str.count semantics). Two ratios, each checked on its own.
//  - lines: text.split("\n") (empty lines included) for the bullet and
//    ellipsis fractions, except that a final "\n" ends the last line rather
//    than starting an empty one. A bullet line's first non-White_Space code point is
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

// c * log2(c), from a table for the small counts that nearly every document
// has (the table holds the very values the expression computes, so the
// entropy is bit-for-bit the same; a log2 call per distinct code point per
// document was a visible share of the metrics' time). c_log2_c(0) is 0.
inline double c_log2_c(uint64_t c) {
  constexpr size_t kTable = 4096;
  static const std::vector<double> table = [] {
    std::vector<double> t(kTable);
    for (size_t i = 1; i < kTable; ++i) t[i] = double(i) * std::log2(double(i));
    return t;
  }();
  return c < kTable ? table[c] : double(c) * std::log2(double(c));
}

inline double ratio(uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; }

struct Scratch {
  detail::QualityScratch kernel;
  std::vector<uint64_t> entropy_counts;
  std::string fixed;
};

}  // namespace

QualityMetrics compute_quality_metrics(std::string_view text) {
  thread_local Scratch tls;
  Scratch& sc = tls;  // one TLS lookup, not one per use
  if (!is_valid_utf8(text)) {  // metrics are defined on code points: decode the standard's way
    sc.fixed.clear();
    replace_invalid_utf8(text, sc.fixed);
    text = sc.fixed;
  }
  detail::QualityCounts c;
  c.entropy_counts = &sc.entropy_counts;
  detail::count_quality(reinterpret_cast<const uint8_t*>(text.data()), text.size(), sc.kernel, c);

  QualityMetrics m{};
  auto M = [&](QualityMetric k) -> double& { return m[static_cast<size_t>(k)]; };
  // Entropy: log2(N) - sum(c log2 c) / N, the sum in a fixed order (ASCII
  // code points in order, then the others in first-occurrence order).
  double sum_clogc = 0.0;
  for (uint64_t k : sc.entropy_counts) sum_clogc += c_log2_c(k);
  const uint64_t total_cp = c.code_points;
  M(QualityMetric::kEntropy) = total_cp ? std::max(0.0, std::log2(double(total_cp)) - sum_clogc / double(total_cp)) : 0.0;
  const uint64_t W = c.words;
  M(QualityMetric::kWordCount) = double(W);
  M(QualityMetric::kMeanWordLength) = ratio(c.word_chars, W);
  M(QualityMetric::kHashWordRatio) = ratio(c.hashes, W);
  M(QualityMetric::kEllipsisWordRatio) = ratio(c.dot_triples + c.ellipsis_chars, W);
  M(QualityMetric::kBulletLineFrac) = double(c.bullet_lines) / double(c.lines);
  M(QualityMetric::kEllipsisLineFrac) = double(c.ellipsis_lines) / double(c.lines);
  M(QualityMetric::kAlphaWordFrac) = ratio(c.alpha_words, W);
  M(QualityMetric::kStopWordCount) = double(c.stop_words);
  M(QualityMetric::kDupLineFrac) = ratio(c.dup_lines, c.line_segments);
  M(QualityMetric::kDupLineCharFrac) = ratio(c.dup_line_chars, total_cp);
  M(QualityMetric::kDupParaFrac) = ratio(c.dup_paras, c.para_segments);
  M(QualityMetric::kDupParaCharFrac) = ratio(c.dup_para_chars, total_cp);
  for (size_t gram = 2; gram <= 10; ++gram) {
    if (!c.gram_defined[gram]) continue;
    const auto metric = gram <= 4 ? static_cast<QualityMetric>(size_t(QualityMetric::kTop2gramCharFrac) + gram - 2)
                                  : static_cast<QualityMetric>(size_t(QualityMetric::kDup5gramCharFrac) + gram - 5);
    M(metric) = ratio(c.gram_covered[gram], c.word_chars);
  }
  return m;
}

}  // namespace luminamoon
