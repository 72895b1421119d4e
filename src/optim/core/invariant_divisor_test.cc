// Note [division by an invariant divisor]: the multiply-and-shift quotient
// against the compiler's '/' over divisors and dividends at every edge.
#include "optim/core/invariant_divisor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace luminav::core {
namespace {

void ExpectExact(uint32_t d, uint32_t n) {
  ASSERT_EQ(divide(invariant_divisor(d), n), n / d) << n << " / " << d;
}

std::vector<uint32_t> EdgeValues() {
  std::vector<uint32_t> v = {0, 1, 2, 3, 4, 5, 7, 768, 1000, 2048, 0x7FFFFFFFu, 0x80000000u, 0x80000001u,
                             0xFFFFFFFEu, 0xFFFFFFFFu};
  for (int b = 1; b < 32; ++b) {
    const uint32_t p = uint32_t{1} << b;
    v.insert(v.end(), {p - 1, p, p + 1});
  }
  return v;
}

TEST(InvariantDivisor, EveryDividendUpTo4096ForSmallDivisors) {
  for (uint32_t d = 1; d <= 300; ++d) {
    for (uint32_t n = 0; n <= 4096; ++n) ExpectExact(d, n);
  }
}

TEST(InvariantDivisor, EdgeDivisorsAndDividends) {
  const std::vector<uint32_t> edges = EdgeValues();
  for (uint32_t d : edges) {
    if (d == 0) continue;
    for (uint32_t n : edges) ExpectExact(d, n);
    // The dividends next to every multiple of d near the top of the range.
    for (uint32_t q = 0xFFFFFFFFu / d, k = 0; k < 4 && q > 0; ++k, --q) {
      const uint64_t multiple = uint64_t{q} * d;
      ExpectExact(d, static_cast<uint32_t>(multiple));
      ExpectExact(d, static_cast<uint32_t>(multiple - 1));
      if (multiple + 1 <= 0xFFFFFFFFu) ExpectExact(d, static_cast<uint32_t>(multiple + 1));
    }
  }
}

TEST(InvariantDivisor, RandomPairs) {
  std::mt19937_64 rng(20261207);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint64_t r = rng();
    // Divisors of every magnitude: a random bit length, then random bits.
    const uint32_t d = static_cast<uint32_t>((r >> 32) >> (r % 32)) | 1u;
    ExpectExact(d, static_cast<uint32_t>(r));
    if (d < 0xFFFFFFFFu) ExpectExact(d + 1, static_cast<uint32_t>(r));
  }
}

TEST(InvariantDivisor, DivisorOneIsTheIdentity) {
  const InvariantDivisor one = invariant_divisor(1);
  EXPECT_EQ(divide(one, 0xFFFFFFFFu), 0xFFFFFFFFu);
  EXPECT_EQ(divide(one, 12345u), 12345u);
}

}  // namespace
}  // namespace luminav::core
