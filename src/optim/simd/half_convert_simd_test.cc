// The vectorized conversions and hash (half_convert-inl.h, stochastic_hash-inl.h)
// against the scalar ones of core/, bit for bit, on every compiled target.
//
// 16 -> 32 bit: all 65536 inputs. 32 -> 16 bit: every upper half (65536
// values, so every sign, exponent and the bits that decide bf16 ties and f16
// subnormal rounding) combined with 40 low halves (ties, one above/below,
// all-ones, random), plus 2^20 random patterns; LUMINAV_EXHAUSTIVE_F32=1
// runs all 2^32 patterns instead (minutes; run by hand, see
// docs/benchmarks-history.md). Stochastic rounding: random draws plus the draws on
// each side of the exact f16 threshold. Hash: random keys and indices
// around 2^32 and 2^64 wrap-around.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "optim/core/half_convert.h"
#include "optim/core/stochastic_hash.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optim/simd/half_convert_simd_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "optim/simd/half_convert-inl.h"
#include "optim/simd/stochastic_hash-inl.h"

#ifndef LUMINAV_SIMD_HALF_CONVERT_TEST_HELPERS
#define LUMINAV_SIMD_HALF_CONVERT_TEST_HELPERS
namespace luminav::simd::test {

inline bool exhaustive_f32() {
  const char* env = std::getenv("LUMINAV_EXHAUSTIVE_F32");
  return env != nullptr && env[0] == '1';
}

// The f32 bit patterns the 32 -> 16 bit tests cover (see the file comment).
inline std::vector<uint32_t> f32_patterns() {
  static const uint32_t kLow[] = {
      0x0000, 0x0001, 0x0002, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001, 0x3fff,
      0x4000, 0x4001, 0x5000, 0x6000, 0x7000, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0x8002,
      0x9000, 0xa000, 0xbfff, 0xc000, 0xc001, 0xdfff, 0xe000, 0xefff, 0xf000, 0xf001,
      0xfffe, 0xffff, 0x0800, 0x07ff, 0x0801, 0x1800, 0x17ff, 0x1801, 0x3000, 0x5fff};
  std::vector<uint32_t> out;
  out.reserve(65536u * (sizeof(kLow) / sizeof(kLow[0])) + (1u << 20));
  for (uint32_t hi = 0; hi < 65536u; ++hi) {
    for (const uint32_t lo : kLow) out.push_back((hi << 16) | lo);
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < (1 << 20); ++i) out.push_back(static_cast<uint32_t>(rng()));
  return out;
}

}  // namespace luminav::simd::test
#endif

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;

// Runs `convert(d, float vector) -> bits` over `in` (a multiple of Lanes).
template <class F>
void convert_f32(const std::vector<uint32_t>& in, std::vector<uint32_t>& out, F convert) {
  const D d;
  const hn::RebindToUnsigned<D> du;
  out.resize(in.size());
  for (size_t i = 0; i + hn::Lanes(d) <= in.size(); i += hn::Lanes(d)) {
    const auto x = hn::BitCast(d, hn::LoadU(du, in.data() + i));
    hn::StoreU(convert(d, x, i), du, out.data() + i);
  }
}

void TestSixteenBitToF32Exhaustive() {
  const D d;
  const hn::RebindToUnsigned<D> du;
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536u; ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> bf(65536), f16(65536);
  for (size_t i = 0; i < h.size(); i += hn::Lanes(d)) {
    const auto bits = load_u16_as_u32(d, h.data() + i);
    hn::StoreU(bf16_to_f32(d, bits), d, bf.data() + i);
    hn::StoreU(f16_to_f32(d, bits), d, f16.data() + i);
    // And back through the 16-bit store.
    std::vector<uint16_t> back(hn::Lanes(d));
    store_u32_as_u16(d, bits, back.data());
    for (size_t j = 0; j < hn::Lanes(d); ++j) ASSERT_EQ(back[j], h[i + j]);
  }
  (void)du;
  size_t mismatches = 0;
  for (uint32_t i = 0; i < 65536u; ++i) {
    const float eb = core::bf16_to_f32(static_cast<uint16_t>(i));
    const float ef = core::f16_to_f32(static_cast<uint16_t>(i));
    if (std::memcmp(&eb, &bf[i], 4) != 0 || std::memcmp(&ef, &f16[i], 4) != 0) {
      if (++mismatches < 5) ADD_FAILURE() << "16-bit input 0x" << std::hex << i;
    }
  }
  EXPECT_EQ(mismatches, 0u) << hwy::TargetName(HWY_TARGET);
}

// Checks the RNE conversions over `patterns`.
void check_rne(const std::vector<uint32_t>& patterns) {
  std::vector<uint32_t> bf, f16;
  convert_f32(patterns, bf, [](D d, hn::Vec<D> x, size_t) { return f32_to_bf16_rne(d, x); });
  convert_f32(patterns, f16, [](D d, hn::Vec<D> x, size_t) { return f32_to_f16_rne(d, x); });
  size_t mismatches = 0;
  for (size_t i = 0; i < patterns.size(); ++i) {
    const float x = core::bits_float(patterns[i]);
    if (bf[i] != core::f32_to_bf16_rne(x) || f16[i] != core::f32_to_f16_rne(x)) {
      if (++mismatches < 5) {
        ADD_FAILURE() << "f32 0x" << std::hex << patterns[i] << ": bf16 " << bf[i] << " vs "
                      << core::f32_to_bf16_rne(x) << ", f16 " << f16[i] << " vs "
                      << core::f32_to_f16_rne(x);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << hwy::TargetName(HWY_TARGET);
}

void TestRoundToNearestEven() {
  if (!test::exhaustive_f32()) {
    check_rne(test::f32_patterns());
    return;
  }
  std::vector<uint32_t> block(size_t{1} << 24);
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += block.size()) {
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint32_t>(start + i);
    check_rne(block);
  }
}

void TestStochasticRounding() {
  const std::vector<uint32_t> patterns = test::f32_patterns();
  std::mt19937 rng(777);
  // Draws: random, fixed edge values, and the draws on each side of the
  // exact f16 threshold ceil(f * 2^32) (computed here in double).
  static const uint32_t kEdges[] = {0u, 1u, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xffffffffu,
                                    0x0000ffffu, 0x00008000u};
  for (int variant = 0; variant < 6; ++variant) {
    std::vector<uint32_t> draws(patterns.size());
    for (size_t i = 0; i < patterns.size(); ++i) {
      if (variant == 0) {
        draws[i] = static_cast<uint32_t>(rng());
      } else if (variant == 1) {
        draws[i] = kEdges[i % 8];
      } else {
        // Threshold-adjacent draws for f16 (variants 2..5: offsets -2..+1).
        const float x = std::fabs(core::bits_float(patterns[i]));
        const uint16_t lo = core::f32_to_f16_stochastic(x, 0xffffffffu);
        const double a = core::f16_to_f32(lo);
        const double b = core::f16_to_f32(static_cast<uint16_t>(lo + 1));
        const double f = (b > a && std::isfinite(b)) ? (x - a) / (b - a) : 0.0;
        const double threshold = std::ceil(f * 4294967296.0) + (variant - 4);
        draws[i] = static_cast<uint32_t>(std::fmin(std::fmax(threshold, 0.0), 4294967295.0));
      }
    }
    std::vector<uint32_t> bf, f16;
    const hn::RebindToUnsigned<D> du;
    convert_f32(patterns, bf, [&](D d, hn::Vec<D> x, size_t i) {
      return f32_to_bf16_stochastic(d, x, hn::LoadU(du, draws.data() + i));
    });
    convert_f32(patterns, f16, [&](D d, hn::Vec<D> x, size_t i) {
      return f32_to_f16_stochastic(d, x, hn::LoadU(du, draws.data() + i));
    });
    size_t mismatches = 0;
    for (size_t i = 0; i < patterns.size(); ++i) {
      const float x = core::bits_float(patterns[i]);
      const uint16_t want_bf = core::f32_to_bf16_stochastic(x, draws[i]);
      const uint16_t want_f16 = core::f32_to_f16_stochastic(x, draws[i]);
      if (bf[i] != want_bf || f16[i] != want_f16) {
        if (++mismatches < 5) {
          ADD_FAILURE() << "f32 0x" << std::hex << patterns[i] << " r 0x" << draws[i] << ": bf16 "
                        << bf[i] << " vs " << want_bf << ", f16 " << f16[i] << " vs " << want_f16;
        }
      }
    }
    EXPECT_EQ(mismatches, 0u) << hwy::TargetName(HWY_TARGET) << " variant " << variant;
  }
}

void TestRoundingStreamMatchesHash() {
  const D d;
  const hn::RebindToUnsigned<D> du;
  const size_t lanes = hn::Lanes(d);
  std::mt19937_64 rng(99);
  const uint64_t seeds[] = {0, 1, 0xffffffffffffffffull, rng(), rng()};
  const uint64_t steps[] = {1, 2, 1000003, rng()};
  const uint64_t starts[] = {0, 1, 17, 0xfffffff0ull, 0x100000000ull - 3, 0xffffffffffffffffull - 5,
                             rng(), rng()};
  std::vector<uint32_t> got(lanes);
  for (const uint64_t seed : seeds) {
    for (const uint64_t step : steps) {
      const RoundingStream<D> stream(d, seed, step);
      for (const uint64_t start : starts) {
        for (uint64_t block = 0; block < 4; ++block) {
          const uint64_t first = start + block * lanes;  // wraps mod 2^64 like the hash
          hn::StoreU(stream.bits(d, first), du, got.data());
          for (size_t j = 0; j < lanes; ++j) {
            ASSERT_EQ(got[j], core::rounding_bits(seed, step, first + j))
                << hwy::TargetName(HWY_TARGET) << " seed " << seed << " step " << step
                << " index " << first + j;
          }
        }
      }
    }
  }
}

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminav::simd {
HWY_BEFORE_TEST(HalfConvertSimd);
HWY_EXPORT_AND_TEST_P(HalfConvertSimd, TestSixteenBitToF32Exhaustive);
HWY_EXPORT_AND_TEST_P(HalfConvertSimd, TestRoundToNearestEven);
HWY_EXPORT_AND_TEST_P(HalfConvertSimd, TestStochasticRounding);
HWY_EXPORT_AND_TEST_P(HalfConvertSimd, TestRoundingStreamMatchesHash);
}  // namespace luminav::simd
#endif
