// QualityFilter: the checks table, thresholds and the parallel evaluation.
#include "luminamoon/quality_filter.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "data/common/parallel.h"

namespace luminamoon {

const char* quality_metric_name(QualityMetric metric) {
  static const char* const kNames[kQualityMetricCount] = {
      "entropy",
      "word_count",
      "mean_word_length",
      "hash_word_ratio",
      "ellipsis_word_ratio",
      "bullet_line_frac",
      "ellipsis_line_frac",
      "alpha_word_frac",
      "stop_word_count",
      "dup_line_frac",
      "dup_para_frac",
      "dup_line_char_frac",
      "dup_para_char_frac",
      "top_2gram_char_frac",
      "top_3gram_char_frac",
      "top_4gram_char_frac",
      "dup_5gram_char_frac",
      "dup_6gram_char_frac",
      "dup_7gram_char_frac",
      "dup_8gram_char_frac",
      "dup_9gram_char_frac",
      "dup_10gram_char_frac",
  };
  const size_t i = static_cast<size_t>(metric);
  return i < kQualityMetricCount ? kNames[i] : "?";
}

const std::vector<QualityCheck>& quality_checks() {
  using M = QualityMetric;
  // Order: entropy, Gopher quality (Rae et al. 2021, appendix A), Gopher repetition.
  static const std::vector<QualityCheck> kChecks = {
      {"min_entropy", M::kEntropy, true, 3.0, false},
      {"min_words", M::kWordCount, true, 50, false},
      {"max_words", M::kWordCount, false, 100000, false},
      {"min_mean_word_length", M::kMeanWordLength, true, 3, false},
      {"max_mean_word_length", M::kMeanWordLength, false, 10, false},
      // The paper's symbol-to-word ratio is "greater than 0.1 for either the hash
      // symbol or the ellipsis": two checks, not one on the sum (spec v2).
      {"max_hash_word_ratio", M::kHashWordRatio, false, 0.1, false},
      {"max_ellipsis_word_ratio", M::kEllipsisWordRatio, false, 0.1, false},
      {"max_bullet_line_frac", M::kBulletLineFrac, false, 0.9, true},
      {"max_ellipsis_line_frac", M::kEllipsisLineFrac, false, 0.3, true},
      {"min_alpha_word_frac", M::kAlphaWordFrac, true, 0.8, true},
      {"min_stop_words", M::kStopWordCount, true, 2, false},
      {"max_dup_line_frac", M::kDupLineFrac, false, 0.30, true},
      {"max_dup_para_frac", M::kDupParaFrac, false, 0.30, true},
      {"max_dup_line_char_frac", M::kDupLineCharFrac, false, 0.20, true},
      {"max_dup_para_char_frac", M::kDupParaCharFrac, false, 0.20, true},
      {"max_top_2gram_char_frac", M::kTop2gramCharFrac, false, 0.20, true},
      {"max_top_3gram_char_frac", M::kTop3gramCharFrac, false, 0.18, true},
      {"max_top_4gram_char_frac", M::kTop4gramCharFrac, false, 0.16, true},
      {"max_dup_5gram_char_frac", M::kDup5gramCharFrac, false, 0.15, true},
      {"max_dup_6gram_char_frac", M::kDup6gramCharFrac, false, 0.14, true},
      {"max_dup_7gram_char_frac", M::kDup7gramCharFrac, false, 0.13, true},
      {"max_dup_8gram_char_frac", M::kDup8gramCharFrac, false, 0.12, true},
      {"max_dup_9gram_char_frac", M::kDup9gramCharFrac, false, 0.11, true},
      {"max_dup_10gram_char_frac", M::kDup10gramCharFrac, false, 0.10, true},
  };
  return kChecks;
}

QualityThresholds::QualityThresholds() {
  for (const QualityCheck& c : quality_checks()) bounds.emplace_back(c.default_bound);
}

namespace {

// Optimal string alignment distance, for "did you mean" on a bad name.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

void QualityThresholds::set(std::string_view name, std::optional<double> bound) {
  if (name == "max_symbol_word_ratio") {  // datatrove's name for the pair: one bound for both, each checked on its own
    set("max_hash_word_ratio", bound);
    set("max_ellipsis_word_ratio", bound);
    return;
  }
  const auto& checks = quality_checks();
  for (size_t i = 0; i < checks.size(); ++i) {
    if (name != checks[i].name) continue;
    if (bound) {
      const double b = *bound;
      if (!std::isfinite(b) || b < 0)
        throw std::invalid_argument(std::string("threshold ") + checks[i].name + " must be a finite number >= 0, got " +
                                    std::to_string(b));
      if (checks[i].is_fraction && b > 1)
        throw std::invalid_argument(std::string("threshold ") + checks[i].name + " is a fraction in [0, 1], got " +
                                    std::to_string(b));
    }
    bounds[i] = bound;
    return;
  }
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const QualityCheck& c : checks) {
    const size_t d = edit_distance(name, c.name);
    if (d < best_d) best_d = d, best = c.name;
  }
  throw std::invalid_argument("unknown quality threshold '" + std::string(name) + "'" +
                              (best_d <= 4 ? " (did you mean '" + best + "'?)" : std::string()));
}

void QualityThresholds::validate() const {
  const auto& checks = quality_checks();
  for (size_t i = 0; i < checks.size(); ++i) {
    if (!checks[i].is_minimum || !bounds[i]) continue;
    for (size_t j = 0; j < checks.size(); ++j)
      if (!checks[j].is_minimum && checks[j].metric == checks[i].metric && bounds[j] && *bounds[i] > *bounds[j])
        throw std::invalid_argument(std::string("threshold ") + checks[i].name + " (" + std::to_string(*bounds[i]) +
                                    ") exceeds " + checks[j].name + " (" + std::to_string(*bounds[j]) + ")");
  }
}

QualityFilter::QualityFilter(QualityThresholds thresholds) : thresholds_(std::move(thresholds)) {
  if (thresholds_.bounds.size() != quality_checks().size())
    throw std::invalid_argument("QualityThresholds: one bound per check is required");
  thresholds_.validate();
}

int QualityFilter::first_failing_check(const QualityMetrics& metrics) const {
  const auto& checks = quality_checks();
  for (size_t i = 0; i < checks.size(); ++i) {
    const auto& bound = thresholds_.bounds[i];
    if (!bound) continue;
    const double v = metrics[static_cast<size_t>(checks[i].metric)];
    if (checks[i].fails(*bound, v)) return static_cast<int>(i);
  }
  return -1;
}

QualityResult QualityFilter::evaluate(const TextBatchView& batch, bool with_metrics) const {
  QualityResult r;
  r.size = batch.size;
  r.keep.assign(batch.size, 0);
  r.failed_check.assign(batch.size, -1);
  if (with_metrics) r.metrics.assign(kQualityMetricCount * batch.size, 0.0);
  for (size_t i = 0; i < batch.size; ++i)
    if (batch.offsets[i + 1] - batch.offsets[i] > std::numeric_limits<uint32_t>::max())
      throw std::length_error("QualityFilter: document " + std::to_string(i) + " is over 4 GiB");
  detail::for_each_document(batch, [&](size_t i, std::string_view text) {
    int failed;
    if (with_metrics) {
      const QualityMetrics m = compute_quality_metrics(text);
      for (size_t k = 0; k < kQualityMetricCount; ++k) r.metrics[k * batch.size + i] = m[k];
      failed = first_failing_check(m);
    } else {
      failed = first_failing_check(text);
    }
    r.failed_check[i] = static_cast<int16_t>(failed);
    r.keep[i] = failed < 0;
  });
  return r;
}

}  // namespace luminamoon
