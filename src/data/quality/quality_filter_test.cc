// QualityFilter: hand-computed metrics on small documents, threshold errors.
#include "luminamoon/quality_filter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <random>
#include <string>
#include <vector>

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
  // Ten words: one '#', two "..." and one U+2026; each ratio on its own.
  EXPECT_NEAR(metric(m, QualityMetric::kHashWordRatio), 1.0 / 10, 1e-12);
  EXPECT_NEAR(metric(m, QualityMetric::kEllipsisWordRatio), 3.0 / 10, 1e-12);
}

// Spec v2: a final newline ends the last line; it does not add an empty line
// to the denominator of the bullet and ellipsis fractions.
TEST(QualityMetrics, FinalNewlineStartsNoLine) {
  const QualityMetrics a = compute_quality_metrics("- wait...\nplain line\n");
  EXPECT_NEAR(metric(a, QualityMetric::kEllipsisLineFrac), 1.0 / 2, 1e-12);
  EXPECT_NEAR(metric(a, QualityMetric::kBulletLineFrac), 1.0 / 2, 1e-12);
  const QualityMetrics b = compute_quality_metrics("- wait...\nplain line");
  EXPECT_EQ(metric(a, QualityMetric::kEllipsisLineFrac), metric(b, QualityMetric::kEllipsisLineFrac));
  // An empty line before the final newline is still a line: "x...", "" -> 1/2.
  const QualityMetrics c = compute_quality_metrics("x...\n\n");
  EXPECT_NEAR(metric(c, QualityMetric::kEllipsisLineFrac), 1.0 / 2, 1e-12);
}

// Rae et al. 2021: drop when the symbol-to-word ratio is over 0.1 "for either
// the hash symbol or the ellipsis". 100 words with 8 '#' and 8 ellipses pass
// (their sum, 0.16, would not); 11 of either alone fail, naming that check.
TEST(QualityFilter, HashAndEllipsisRatiosEachOnItsOwn) {
  auto doc = [](int hashes, int ellipses) {
    std::string t;
    for (int i = 0; i < 100; ++i) {
      if (i < hashes) t += "#";
      t += (i % 4 == 0) ? "the" : (i % 4 == 1) ? "river" : (i % 4 == 2) ? "of" : "garden";
      if (i >= 50 && i < 50 + ellipses) t += "...";
      t += (i % 10 == 9) ? "\n" : " ";
    }
    return t;
  };
  QualityThresholds t;
  for (const char* name : {"max_dup_line_frac", "max_dup_para_frac", "max_dup_line_char_frac", "max_dup_para_char_frac",
                           "max_top_2gram_char_frac", "max_top_3gram_char_frac", "max_top_4gram_char_frac",
                           "max_dup_5gram_char_frac", "max_dup_6gram_char_frac", "max_dup_7gram_char_frac",
                           "max_dup_8gram_char_frac", "max_dup_9gram_char_frac", "max_dup_10gram_char_frac"})
    t.set(name, std::nullopt);  // the generated text repeats itself on purpose
  const QualityFilter f(t);
  auto failing = [&](const std::string& text) {
    const int k = f.first_failing_check(compute_quality_metrics(text));
    return k < 0 ? std::string() : std::string(quality_checks()[k].name);
  };
  EXPECT_EQ(failing(doc(8, 8)), "");
  EXPECT_EQ(failing(doc(11, 0)), "max_hash_word_ratio");
  EXPECT_EQ(failing(doc(0, 11)), "max_ellipsis_word_ratio");
  // datatrove's option name sets both bounds.
  QualityThresholds d = t;
  d.set("max_symbol_word_ratio", 0.05);
  EXPECT_EQ(QualityFilter(d).first_failing_check(compute_quality_metrics(doc(8, 0))) >= 0, true);
  EXPECT_EQ(std::string(quality_checks()[QualityFilter(d).first_failing_check(compute_quality_metrics(doc(0, 8)))].name),
            "max_ellipsis_word_ratio");
}

// Note [verdict only]: the verdict from the text, which stops counting at the
// first failing check, equals the verdict from the full metrics, for
// documents that fail in every phase (words and lines, duplicates, each
// n-gram size) under the defaults and under bounds that make each check the
// deciding one. (tests/data/test_quality.py holds both to the Python reference.)
TEST(QualityFilter, VerdictFromTheTextEqualsTheVerdictFromTheMetrics) {
  std::mt19937 rng(42);
  const char* const vocab[] = {"the", "of", "river", "garden", "data", "model", "#", "...", "-", "x2", "caf\xC3\xA9"};
  std::vector<std::string> docs;
  for (int d = 0; d < 300; ++d) {
    std::string t;
    const int lines = 1 + static_cast<int>(rng() % 12), repeat = static_cast<int>(rng() % 4);
    std::string line;
    for (int l = 0; l < lines; ++l) {
      if (l == 0 || rng() % 4 >= static_cast<unsigned>(repeat)) {  // more repeated lines as `repeat` grows
        line.clear();
        const int words = 1 + static_cast<int>(rng() % 20);
        for (int w = 0; w < words; ++w) line += std::string(vocab[rng() % std::size(vocab)]) + " ";
      }
      t += line + (rng() % 3 == 0 ? "\n\n" : "\n");
    }
    docs.push_back(t);
  }
  std::vector<QualityThresholds> configs(1);  // the defaults
  for (size_t c = 0; c < quality_checks().size(); ++c) {  // each check alone, at a bound some documents fail
    QualityThresholds t;
    for (auto& b : t.bounds) b.reset();
    const QualityCheck& check = quality_checks()[c];
    t.bounds[c] = check.is_minimum ? check.default_bound : check.default_bound / 4;
    configs.push_back(t);
  }
  for (const QualityThresholds& t : configs) {
    const QualityFilter f(t);
    for (const std::string& doc : docs)
      ASSERT_EQ(f.first_failing_check(std::string_view(doc)), f.first_failing_check(compute_quality_metrics(doc))) << doc;
  }
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
