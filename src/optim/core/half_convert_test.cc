// f32 <-> bf16 / f16: exhaustive round trips, independent references, RNE
// ties and subnormals worked out by hand, the stochastic rounding recipe and
// its unbiasedness.
#include "optim/core/half_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "optim/core/stochastic_hash.h"

namespace luminav::core {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Independent f16 decoding from the IEEE 754 binary16 definition.
double f16_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0x1f) {
    v = mantissa ? NAN : INFINITY;
  } else if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else {
    v = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -v : v;
}

// Independent RNE to f16 by search over the ordered positive codes, with
// 0x7c00 standing for 65536 (IEEE rounds as if the exponent were unbounded).
uint16_t f16_rne_reference(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  auto value = [](uint32_t code) { return code == 0x7c00 ? 65536.0 : f16_value(code); };
  if (a >= 65536.0) return sign | 0x7c00;
  uint32_t lo = 0, hi = 0x7c00;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double below = a - value(lo), above = value(hi) - a;  // exact in double
  uint32_t code = below < above ? lo : above < below ? hi : ((lo & 1) ? hi : lo);
  return static_cast<uint16_t>(sign | code);
}

// Independent RNE to bf16 on the integer bit pattern: compare the dropped
// 16 bits with one half (0x8000); ties go to the even upper half.
uint16_t bf16_rne_reference(float x) {
  const uint32_t u = bits_of(x);
  uint32_t upper = u >> 16;
  const uint32_t dropped = u & 0xffff;
  if (dropped > 0x8000 || (dropped == 0x8000 && (upper & 1))) ++upper;
  return static_cast<uint16_t>(upper);
}

bool is_f16_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

// ---- exhaustive round trips ---------------------------------------------------

TEST(HalfConvert, Bf16AllPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(f), h << 16) << h;  // bf16 is the upper half of f32
    const uint16_t back = f32_to_bf16_rne(f);
    if (is_bf16_nan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(is_bf16_nan(back)) << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << h;  // sign kept
      ASSERT_NE(back & 0x40, 0) << h;             // quiet
    } else {
      ASSERT_EQ(back, h) << h;
    }
  }
}

TEST(HalfConvert, F16AllPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t code = static_cast<uint16_t>(h);
    const float f = f16_to_f32(code);
    if (is_f16_nan(code)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      const uint16_t back = f32_to_f16_rne(f);
      ASSERT_TRUE(is_f16_nan(back)) << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << h;
      ASSERT_NE(back & 0x200, 0) << h;  // quiet
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), f16_value(code)) << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    ASSERT_EQ(f32_to_f16_rne(f), code) << h;
  }
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 (IEEE binary16, RNE) as a second reference.
TEST(HalfConvert, F16AgreesWithCompilerFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t code = static_cast<uint16_t>(h);
    _Float16 native;
    std::memcpy(&native, &code, 2);
    const float expected = static_cast<float>(native);
    const float got = f16_to_f32(code);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(bits_of(got), bits_of(expected)) << h;
    }
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < (1 << 20); ++i) {
    const float x = float_of(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const _Float16 native = static_cast<_Float16>(x);
    uint16_t expected;
    std::memcpy(&expected, &native, 2);
    ASSERT_EQ(f32_to_f16_rne(x), expected) << std::hex << bits_of(x);
  }
}
#endif

// f32 -> 16 bits against the independent references over every exponent:
// each of 2^16 strided patterns, then all low bits around the rounding point.
TEST(HalfConvert, RneMatchesIndependentReferences) {
  std::vector<uint32_t> patterns;
  for (uint64_t u = 0; u < (1ull << 32); u += 65537) patterns.push_back(static_cast<uint32_t>(u));
  for (uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x2fffu, 0x3000u, 0x7fffu, 0x8000u,
                         0x8001u, 0xffffu, 0x18000u, 0x17fffu}) {
      patterns.push_back((exponent << 23) | low);
      patterns.push_back(0x80000000u | (exponent << 23) | low | 0x7f0000u);
    }
  }
  for (uint32_t u : patterns) {
    const float x = float_of(u);
    if (std::isnan(x)) continue;
    ASSERT_EQ(f32_to_bf16_rne(x), bf16_rne_reference(x)) << std::hex << u;
    ASSERT_EQ(f32_to_f16_rne(x), f16_rne_reference(x)) << std::hex << u;
  }
}

// ---- known answers, worked out by hand -------------------------------------------

TEST(HalfConvert, Bf16TiesAndSubnormals) {
  // 1 + 2^-8 (0x3F808000) lies halfway between 1.0 (0x3F80) and 1 + 2^-7
  // (0x3F81): the tie goes to the even 0x3F80.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F808000)), 0x3F80);
  // 0x3F818000 is halfway between 0x3F81 and 0x3F82: even is 0x3F82.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F818000)), 0x3F82);
  // One bit above the tie rounds up; one below rounds down.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F808001)), 0x3F81);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F807FFF)), 0x3F80);
  // -1.5 - tie: 0xBFC08000 between 0xBFC0 and 0xBFC1 goes to 0xBFC0.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xBFC08000)), 0xBFC0);
  // f32 subnormals: 0x00018000 is halfway between bf16 subnormals 1 and 2
  // (units of 2^-133): even is 2. 0x00008000 is halfway between 0 and 1: 0.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x00018000)), 0x0002);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x00008000)), 0x0000);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x80008001)), 0x8001);
  // The largest bf16 is 0x7F7F; the largest f32 0x7F7FFFFF is above it plus
  // half an ulp (0x7F7F8000, itself a tie going to the even 0x7F80 = Inf).
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7FFFFF)), 0x7F80);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7F7FFF)), 0x7F7F);
  // NaNs stay NaN, quiet, sign kept; Inf stays Inf.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7FC00001)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F800001)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xFF800001)), 0xFFC0);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xFF800000)), 0xFF80);
}

TEST(HalfConvert, F16TiesAndSubnormals) {
  // The f16 ulp at 1 is 2^-10. 1 + 2^-11 (0x3F801000) is halfway between
  // 0x3C00 and 0x3C01: even 0x3C00. 1 + 3*2^-11 (0x3F803000) is halfway
  // between 0x3C01 and 0x3C02: even 0x3C02.
  EXPECT_EQ(f32_to_f16_rne(float_of(0x3F801000)), 0x3C00);
  EXPECT_EQ(f32_to_f16_rne(float_of(0x3F803000)), 0x3C02);
  EXPECT_EQ(f32_to_f16_rne(float_of(0x3F801001)), 0x3C01);
  EXPECT_EQ(f32_to_f16_rne(float_of(0xBF803000)), 0xBC02);
  // The largest f16 is 65504 (0x7BFF, ulp 32). 65520 (0x477FF000) is the
  // tie between 65504 and the next step 65536 (Inf): odd 0x7BFF loses, Inf.
  EXPECT_EQ(f32_to_f16_rne(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_rne(float_of(0x477FEFFF)), 0x7BFF);
  EXPECT_EQ(f32_to_f16_rne(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16_rne(-1e6f), 0xFC00);
  // Subnormals are multiples of 2^-24. 2^-24 (0x33800000) is code 1.
  // 2^-25 (0x33000000) is halfway between 0 and 1: even 0. 1.5 * 2^-24
  // (0x33C00000) is halfway between 1 and 2: even 2. Just above 2^-25: 1.
  EXPECT_EQ(f32_to_f16_rne(float_of(0x33800000)), 0x0001);
  EXPECT_EQ(f32_to_f16_rne(float_of(0x33000000)), 0x0000);
  EXPECT_EQ(f32_to_f16_rne(float_of(0x33C00000)), 0x0002);
  EXPECT_EQ(f32_to_f16_rne(float_of(0x33000001)), 0x0001);
  // 1023.5 * 2^-24 (0x387FE000) is halfway between the largest subnormal
  // 0x03FF and the smallest normal 0x0400 (2^-14): even 0x0400.
  EXPECT_EQ(f32_to_f16_rne(float_of(0x387FE000)), 0x0400);
  EXPECT_EQ(f16_to_f32(0x03FF), 1023.0f * std::ldexp(1.0f, -24));
  // f32 subnormals are far below 2^-25: zero with the sign kept.
  EXPECT_EQ(f32_to_f16_rne(float_of(0x80000001)), 0x8000);
  // NaN stays a quiet NaN with its sign.
  EXPECT_EQ(f32_to_f16_rne(float_of(0x7FC00000)), 0x7E00);
  EXPECT_EQ(f32_to_f16_rne(float_of(0xFF800001)) & 0xFE00, 0xFE00);
}

// ---- stochastic rounding ---------------------------------------------------------

TEST(StochasticRounding, Bf16FollowsTheBitRecipe) {
  std::mt19937 rng(99);
  for (int i = 0; i < 200000; ++i) {
    // Finite values whose RNE result and recipe result are finite (the
    // saturation cases have their own test).
    const uint32_t u = static_cast<uint32_t>(rng()) & 0xff7fffffu;
    const float x = float_of(u);
    const uint32_t r = static_cast<uint32_t>(rng());
    const uint16_t expected = static_cast<uint16_t>((u + (r & 0xffffu)) >> 16);
    if ((expected & 0x7f80) == 0x7f80 || (bf16_rne_reference(x) & 0x7f80) == 0x7f80) continue;
    ASSERT_EQ(f32_to_bf16_stochastic(x, r), expected) << std::hex << u << " " << r;
  }
  // Exactly representable values never move.
  EXPECT_EQ(f32_to_bf16_stochastic(1.0f, 0xffffffffu), 0x3F80);
}

TEST(StochasticRounding, Bf16SaturatesLikeRne) {
  // Below the largest bf16 + half an ulp the sum may carry into Inf; the
  // spec forbids that overflow: the largest finite bf16 comes out.
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x7F7F7FFF), 0xffff), 0x7F7F);
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0xFF7F7FFF), 0xffff), 0xFF7F);
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x7F7F7FFF), 0), 0x7F7F);
  // At and above it every r gives Inf, as RNE does.
  for (uint32_t r : {0u, 1u, 0x7fffu, 0xffffu}) {
    EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x7F7F8000), r), 0x7F80);
    EXPECT_EQ(f32_to_bf16_stochastic(float_of(0xFF7FFFFF), r), 0xFF80);
  }
  EXPECT_EQ(f32_to_bf16_stochastic(INFINITY, 0x1234), 0x7F80);
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16_stochastic(NAN, 0xffff)));
}

TEST(StochasticRounding, F16FollowsTheRecipe) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> magnitude(-20.0f, 15.9f);
  for (int i = 0; i < 20000; ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(magnitude(rng));
    const uint16_t nearest = f16_rne_reference(x);
    const double ax = std::fabs(static_cast<double>(x));
    // lo: toward zero; hi: next code away from zero.
    uint16_t lo = nearest & 0x7fff;
    if (f16_value(lo) > ax) --lo;
    const uint16_t hi = lo + 1;
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (f16_value(lo) == ax) {
      EXPECT_EQ(f32_to_f16_stochastic(x, 0xffffffffu), sign | lo);
      continue;
    }
    const float f = static_cast<float>(ax - f16_value(lo)) / static_cast<float>(f16_value(hi) - f16_value(lo));
    // The decision point r* = f * 2^32: hi iff r * 2^-32 < f (exactly).
    const double point = static_cast<double>(f) * 4294967296.0;
    const uint64_t first_lo = static_cast<uint64_t>(std::ceil(point));  // smallest r giving lo
    for (int64_t delta = -2; delta <= 2; ++delta) {
      const int64_t r = static_cast<int64_t>(first_lo) + delta;
      if (r < 0 || r > 0xffffffffll) continue;
      const bool up = static_cast<double>(r) < point;
      ASSERT_EQ(f32_to_f16_stochastic(x, static_cast<uint32_t>(r)), sign | (up ? hi : lo))
          << x << " r=" << r;
    }
    const uint32_t r = static_cast<uint32_t>(rng());
    ASSERT_EQ(f32_to_f16_stochastic(x, r), sign | (static_cast<double>(r) < point ? hi : lo));
  }
}

TEST(StochasticRounding, F16SaturatesAndKeepsSubnormals) {
  // Beyond the largest f16 (65504) values round like RNE: 65510 -> 65504,
  // 65520 and above -> Inf, whatever r is.
  for (uint32_t r : {0u, 0x80000000u, 0xffffffffu}) {
    EXPECT_EQ(f32_to_f16_stochastic(65510.0f, r), 0x7BFF);
    EXPECT_EQ(f32_to_f16_stochastic(-70000.0f, r), 0xFC00);
    EXPECT_EQ(f32_to_f16_stochastic(INFINITY, r), 0x7C00);
  }
  EXPECT_TRUE(is_f16_nan(f32_to_f16_stochastic(NAN, 0)));
  // 1.25 * 2^-24 lies a quarter of the way from code 1 to code 2: r = 0
  // rounds up (0 < 0.25), r = 2^31 rounds down (0.5 >= 0.25).
  const float x = 1.25f * std::ldexp(1.0f, -24);
  EXPECT_EQ(f32_to_f16_stochastic(x, 0), 0x0002);
  EXPECT_EQ(f32_to_f16_stochastic(x, 0x80000000u), 0x0001);
  EXPECT_EQ(f32_to_f16_stochastic(-x, 0), 0x8002);
}

// Mean of M roundings of one value keyed by the spec's hash over indices.
// Each rounding is lo or hi, so its standard deviation is at most (hi-lo)/2;
// the mean's is at most (hi-lo)/(2 sqrt(M)). We require |mean - x| <= 6 of
// those (a one-in-10^9 event for independent bits; the hash is fixed, so the
// test is deterministic).
template <class Round, class Decode>
void expect_unbiased(float x, double spacing, Round round, Decode decode) {
  constexpr int kSamples = 1 << 18;
  double sum = 0.0;
  for (int i = 0; i < kSamples; ++i) sum += decode(round(x, rounding_bits(2024, 3, i)));
  const double mean = sum / kSamples;
  const double bound = 6.0 * spacing / (2.0 * std::sqrt(static_cast<double>(kSamples)));
  EXPECT_NEAR(mean, static_cast<double>(x), bound) << "x=" << x;
}

TEST(StochasticRounding, Bf16IsUnbiased) {
  for (float x : {1.0f + 0.3f / 128, -3.14159f, 1e-3f, 7.77e20f, float_of(0x00012345)}) {
    const double spacing = std::fabs(static_cast<double>(bf16_to_f32(static_cast<uint16_t>((bits_of(x) >> 16) + 1))) -
                                     bf16_to_f32(static_cast<uint16_t>(bits_of(x) >> 16)));
    expect_unbiased(x, spacing, f32_to_bf16_stochastic,
                    [](uint16_t h) { return static_cast<double>(bf16_to_f32(h)); });
  }
}

TEST(StochasticRounding, F16IsUnbiased) {
  for (float x : {1.0f + 0.3f / 1024, -3.14159f, 1e-3f, 60000.5f, 1.7f * std::ldexp(1.0f, -24)}) {
    const uint16_t lo = f32_to_f16_rne(x) & 0x7fff;
    const double spacing = std::fabs(f16_value(lo + 1) - f16_value(lo));
    expect_unbiased(x, spacing, f32_to_f16_stochastic, [](uint16_t h) { return f16_value(h); });
  }
}

}  // namespace
}  // namespace luminav::core
