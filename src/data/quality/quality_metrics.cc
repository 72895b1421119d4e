// The quality metrics of one document: the counts come from the kernel
// (quality_kernel.cc, linear time), the ratios and the entropy from here.
#include <algorithm>
#include <cstdint>
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

// One per thread (its code point table alone is 4.4 MB).
Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The counts of one document, decoded the standard's way first where it is
// not valid UTF-8 (the metrics are defined on code points).
detail::QualityCounts count(std::string_view text, Scratch& sc, detail::QualityStop* stop) {
  if (!is_valid_utf8(text)) {
    sc.fixed.clear();
    replace_invalid_utf8(text, sc.fixed);
    text = sc.fixed;
  }
  detail::QualityCounts c;
  c.entropy_counts = &sc.entropy_counts;
  detail::count_quality(reinterpret_cast<const uint8_t*>(text.data()), text.size(), sc.kernel, c, stop);
  return c;
}

double& at(QualityMetrics& m, QualityMetric k) { return m[static_cast<size_t>(k)]; }

// The metrics from the word and line counts: entropy .. stop words.
void words_and_lines_metrics(const detail::QualityCounts& c, const std::vector<uint64_t>& entropy_counts,
                             QualityMetrics& m) {
  // Entropy: log2(N) - sum(c log2 c) / N, the sum in a fixed order (ASCII
  // code points in order, then the others in first-occurrence order).
  double sum_clogc = 0.0;
  for (uint64_t k : entropy_counts) sum_clogc += c_log2_c(k);
  const uint64_t total_cp = c.code_points;
  at(m, QualityMetric::kEntropy) =
      total_cp ? std::max(0.0, std::log2(double(total_cp)) - sum_clogc / double(total_cp)) : 0.0;
  const uint64_t W = c.words;
  at(m, QualityMetric::kWordCount) = double(W);
  at(m, QualityMetric::kMeanWordLength) = ratio(c.word_chars, W);
  at(m, QualityMetric::kHashWordRatio) = ratio(c.hashes, W);
  at(m, QualityMetric::kEllipsisWordRatio) = ratio(c.dot_triples + c.ellipsis_chars, W);
  at(m, QualityMetric::kBulletLineFrac) = double(c.bullet_lines) / double(c.lines);
  at(m, QualityMetric::kEllipsisLineFrac) = double(c.ellipsis_lines) / double(c.lines);
  at(m, QualityMetric::kAlphaWordFrac) = ratio(c.alpha_words, W);
  at(m, QualityMetric::kStopWordCount) = double(c.stop_words);
}

void duplicate_metrics(const detail::QualityCounts& c, QualityMetrics& m) {
  at(m, QualityMetric::kDupLineFrac) = ratio(c.dup_lines, c.line_segments);
  at(m, QualityMetric::kDupLineCharFrac) = ratio(c.dup_line_chars, c.code_points);
  at(m, QualityMetric::kDupParaFrac) = ratio(c.dup_paras, c.para_segments);
  at(m, QualityMetric::kDupParaCharFrac) = ratio(c.dup_para_chars, c.code_points);
}

QualityMetric ngram_metric_of(size_t gram) {
  return gram <= 4 ? static_cast<QualityMetric>(size_t(QualityMetric::kTop2gramCharFrac) + gram - 2)
                   : static_cast<QualityMetric>(size_t(QualityMetric::kDup5gramCharFrac) + gram - 5);
}

void ngram_metric(const detail::QualityCounts& c, size_t gram, QualityMetrics& m) {
  if (c.gram_defined[gram]) at(m, ngram_metric_of(gram)) = ratio(c.gram_covered[gram], c.word_chars);
}

// The kernel's phase that a metric's count comes from, as a rank: 0 words
// and lines, 1 duplicates, 2.. the n-grams from 2 up.
size_t phase_rank(QualityMetric k) {
  const size_t i = static_cast<size_t>(k);
  if (i <= static_cast<size_t>(QualityMetric::kStopWordCount)) return 0;
  if (i <= static_cast<size_t>(QualityMetric::kDupParaCharFrac)) return 1;
  return 2 + (i - static_cast<size_t>(QualityMetric::kTop2gramCharFrac));
}

// Note [verdict only]: a pipeline that keeps no metrics needs only the first
// failing check, and the checks come in the order of the kernel's phases
// (word and line counts, duplicates, then the n-grams by size). At the end
// of each phase its metrics are computed and the checks are read in order
// up to the first one whose metric a later phase gives: a failure among
// them is the document's verdict (every check before it passed), and the
// kernel stops there. On the real-text corpus about 40% of the bytes fail
// a word-level check, and their duplicate and n-gram counts are skipped:
// the stage takes 21-36% less CPU there (session 10). The verdict is the one that the full
// metrics give: the metrics are computed by the same functions from the
// same counts, only fewer of them.
class FirstFailure final : public detail::QualityStop {
 public:
  FirstFailure(const QualityFilter& filter, const std::vector<uint64_t>& entropy_counts)
      : filter_(filter), entropy_counts_(entropy_counts) {}

  bool decided(const detail::QualityCounts& c, detail::QualityPhase phase, size_t gram) override {
    size_t known = 0;  // metrics of phase rank < known are computed
    switch (phase) {
      case detail::QualityPhase::kWordsAndLines: words_and_lines_metrics(c, entropy_counts_, metrics_); known = 1; break;
      case detail::QualityPhase::kDuplicates: duplicate_metrics(c, metrics_); known = 2; break;
      case detail::QualityPhase::kNgram: ngram_metric(c, gram, metrics_); known = gram + 1; break;
    }
    return scan(known);
  }

  // The verdict once the kernel has returned. Without an early stop every
  // metric is known: the n-gram sizes the kernel did not reach have no
  // repeated n-gram, and their metrics are 0.
  int finish() {
    if (failed_ < 0) scan(SIZE_MAX);
    return failed_;
  }

 private:
  bool scan(size_t known) {
    const auto& checks = quality_checks();
    const auto& bounds = filter_.thresholds().bounds;
    for (size_t i = 0; i < checks.size(); ++i) {
      if (phase_rank(checks[i].metric) >= known) return false;
      if (!bounds[i]) continue;
      const double v = metrics_[static_cast<size_t>(checks[i].metric)];
      if (checks[i].fails(*bounds[i], v)) {
        failed_ = static_cast<int>(i);
        return true;
      }
    }
    return false;
  }

  const QualityFilter& filter_;
  const std::vector<uint64_t>& entropy_counts_;
  QualityMetrics metrics_{};
  int failed_ = -1;
};

}  // namespace

QualityMetrics compute_quality_metrics(std::string_view text) {
  Scratch& sc = thread_scratch();
  const detail::QualityCounts c = count(text, sc, nullptr);
  QualityMetrics m{};
  words_and_lines_metrics(c, sc.entropy_counts, m);
  duplicate_metrics(c, m);
  for (size_t gram = 2; gram <= 10; ++gram) ngram_metric(c, gram, m);
  return m;
}

int QualityFilter::first_failing_check(std::string_view text) const {
  Scratch& sc = thread_scratch();
  FirstFailure verdict(*this, sc.entropy_counts);
  count(text, sc, &verdict);
  return verdict.finish();
}

}  // namespace luminamoon
