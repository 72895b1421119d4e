// QualityFilter: entropy, Gopher quality and Gopher repetition metrics and the
// thresholds that decide which documents are kept (spec section 3).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/text_batch.h"

namespace luminamoon {

// The per-document metrics, in column order. Definitions (see Note [quality
// metrics] in src/data/quality/quality_metrics.cc for the details):
//  - characters are code points; words are maximal runs of non-whitespace
//    (Unicode White_Space); lines are split at "\n".
//  - a ratio whose denominator is 0 is 0.
enum class QualityMetric : uint8_t {
  kEntropy,             // Shannon entropy, bits per code point
  kWordCount,           // number of words
  kMeanWordLength,      // mean code points per word
  kHashWordRatio,       // #'#' / words (Gopher's symbol-to-word ratio for the hash)
  kEllipsisWordRatio,   // (#"..." + #U+2026) / words (the same for the ellipsis, checked on its own)
  kBulletLineFrac,      // lines whose first non-space is a bullet (U+2022, '-', '*')
  kEllipsisLineFrac,    // lines ending (before trailing spaces) with "..." or U+2026; a final "\n" ends the last line, it starts none
  kAlphaWordFrac,       // words holding an alphabetic code point
  kStopWordCount,       // words equal to a stop word after trimming ASCII punctuation, lower-cased
  kDupLineFrac,         // duplicate non-empty lines / non-empty lines
  kDupParaFrac,         // duplicate paragraphs (split at 2+ "\n") / paragraphs
  kDupLineCharFrac,     // code points in duplicate lines / code points of the document
  kDupParaCharFrac,     // code points in duplicate paragraphs / code points of the document
  kTop2gramCharFrac,    // word code points covered by the most frequent repeated 2-gram / all word code points
  kTop3gramCharFrac,
  kTop4gramCharFrac,
  kDup5gramCharFrac,    // word code points covered by any repeated 5-gram / all word code points
  kDup6gramCharFrac,
  kDup7gramCharFrac,
  kDup8gramCharFrac,
  kDup9gramCharFrac,
  kDup10gramCharFrac,
  kCount
};
inline constexpr size_t kQualityMetricCount = static_cast<size_t>(QualityMetric::kCount);
const char* quality_metric_name(QualityMetric metric);

// One check: a metric compared against an optional bound. The check's name
// (the threshold's option name, e.g. "min_words") is the drop reason.
struct QualityCheck {
  const char* name;
  QualityMetric metric;
  bool is_minimum;        // fails when metric < bound (else when metric > bound)
  double default_bound;
  bool is_fraction;       // a bound outside [0, 1] is rejected
  bool fails(double bound, double value) const { return is_minimum ? value < bound : value > bound; }
};
// Every check, in the order they are evaluated (the first failing one names the drop).
const std::vector<QualityCheck>& quality_checks();

struct QualityThresholds {
  // One optional bound per entry of quality_checks(); std::nullopt disables it.
  std::vector<std::optional<double>> bounds;

  QualityThresholds();  // the spec's defaults
  // Sets a bound by its check name; throws std::invalid_argument for an
  // unknown name (with a suggestion) or a NaN / negative bound.
  void set(std::string_view name, std::optional<double> bound);
  // Throws std::invalid_argument when a minimum exceeds its maximum.
  void validate() const;
};

struct QualityResult {
  std::vector<uint8_t> keep;             // 1 = kept
  std::vector<int16_t> failed_check;     // index into quality_checks(), -1 when kept
  // Column-major metrics: metrics[m * size + i] is metric m of document i.
  std::vector<double> metrics;
  size_t size = 0;
  double metric(QualityMetric m, size_t i) const { return metrics[static_cast<size_t>(m) * size + i]; }
};

using QualityMetrics = std::array<double, kQualityMetricCount>;

// Metrics of one document; linear in its length.
QualityMetrics compute_quality_metrics(std::string_view text);

class QualityFilter {
 public:
  explicit QualityFilter(QualityThresholds thresholds = {});
  const QualityThresholds& thresholds() const { return thresholds_; }

  // Index of the first failing check, or -1 when the document passes.
  int first_failing_check(const QualityMetrics& metrics) const;
  // The same verdict from the text, counting only what the checks up to the
  // first failure need (Note [verdict only] in quality_metrics.cc).
  int first_failing_check(std::string_view text) const;
  // Parallel over documents (oneTBB). Without metrics, `metrics` stays empty
  // and each verdict stops counting at its first failing check.
  QualityResult evaluate(const TextBatchView& batch, bool with_metrics = true) const;

 private:
  QualityThresholds thresholds_;
};

}  // namespace luminamoon
