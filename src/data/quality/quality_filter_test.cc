// QualityFilter: hand-computed metrics on small documents, threshold errors.
#include "luminamoon/quality_filter.h"

#include <gtest/gtest.h>

#include <cmath>

namespace luminamoon {
namespace {

double metric(const QualityMetrics& m, QualityMetric k) { return m[static_cast<size_t>(k)]; }

TEST(QualityMetrics, HandComputed) {
  // "ab ab ab": words {ab, ab, ab}; code points a:3 b:3 ' ':2 -> entropy of (3,3,2)/8.
  const QualityMetrics m = compute_quality_metrics("ab ab ab");
  const double p[3] = {3.0 / 8, 3.0 / 8, 2.0 / 8};
  double h = 0;
  for (double x : p) h -= x * std::log2(x);
  EXPECT_NEAR(metric(m, QualityMetric::kEntropy), h, 1e-12);
  EXPECT_EQ(metric(m, QualityMetric::kWordCount), 3);
  EXPECT_EQ(metric(m, QualityMetric::kMeanWordLength), 2);
  // 2-grams: (ab ab) twice, covering all 3 words.
  EXPECT_EQ(metric(m, QualityMetric::kTop2gramCharFrac), 1.0);
  EXPECT_EQ(metric(m, QualityMetric::kTop3gramCharFrac), 0.0);
}

TEST(QualityMetrics, LinesAndSymbols) {
  const QualityMetrics m = compute_quality_metrics("- x ...\n- x ...\n# the of \xE2\x80\xA6");
  EXPECT_NEAR(metric(m, QualityMetric::kBulletLineFrac), 2.0 / 3, 1e-12);
  EXPECT_NEAR(metric(m, QualityMetric::kEllipsisLineFrac), 1.0, 1e-12);
  EXPECT_NEAR(metric(m, QualityMetric::kDupLineFrac), 1.0 / 3, 1e-12);
  EXPECT_EQ(metric(m, QualityMetric::kStopWordCount), 2);
  EXPECT_NEAR(metric(m, QualityMetric::kSymbolWordRatio), 4.0 / 10, 1e-12);
}

TEST(QualityThresholds, Errors) {
  QualityThresholds t;
  EXPECT_THROW(t.set("min_wrods", 3), std::invalid_argument);
  EXPECT_THROW(t.set("min_words", -1), std::invalid_argument);
  EXPECT_THROW(t.set("max_dup_line_frac", 1.5), std::invalid_argument);
  t.set("min_words", 500);
  t.set("max_words", 100);
  EXPECT_THROW(t.validate(), std::invalid_argument);
  t.set("max_words", std::nullopt);
  EXPECT_NO_THROW(t.validate());
}

}  // namespace
}  // namespace luminamoon
