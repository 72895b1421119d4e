// accurate_tanh (the soft clip's tanh) against std::tanh in double, in fp32
// ulp, on every compiled target; Highway's hn::Tanh is measured alongside
// (Note [tanh accuracy] in accurate_tanh-inl.h).
//
// The sweep takes every 499th fp32 pattern of [0, 12] (about 2.2 million
// values, all binades) plus their negatives' sample and the saturation
// region; LUMINAV_EXHAUSTIVE_F32=1 takes every pattern of [0, 12] instead.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "optim/core/half_convert.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optim/simd/accurate_tanh_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "optim/simd/accurate_tanh-inl.h"

#ifndef LUMINAV_SIMD_TANH_TEST_HELPERS
#define LUMINAV_SIMD_TANH_TEST_HELPERS
namespace luminav::simd::test {

// |got - exact| in units of the fp32 spacing at the exact value.
inline double ulp_error(float got, double exact) {
  const double magnitude = std::fabs(exact);
  const double ulp = magnitude < 0x1p-126 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(magnitude) - 23);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

struct Sweep {
  double worst = 0.0;
  float worst_x = 0.0f;
};

}  // namespace luminav::simd::test
#endif

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;

template <class F>
test::Sweep sweep(const std::vector<float>& xs, F tanh_of) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  std::vector<float> out(lanes);
  test::Sweep s;
  for (size_t i = 0; i + lanes <= xs.size(); i += lanes) {
    hn::StoreU(tanh_of(d, hn::LoadU(d, xs.data() + i)), d, out.data());
    for (size_t j = 0; j < lanes; ++j) {
      const double e = test::ulp_error(out[j], std::tanh(static_cast<double>(xs[i + j])));
      if (!(e <= s.worst)) {  // also catches NaN
        s.worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
        s.worst_x = xs[i + j];
      }
    }
  }
  return s;
}

void TestTanhWithinTwoUlp() {
  const D d;
  const size_t lanes = hn::Lanes(d);
  const bool exhaustive = std::getenv("LUMINAV_EXHAUSTIVE_F32") != nullptr;
  const uint32_t stride = exhaustive ? 1 : 499;
  const uint32_t last = core::float_bits(12.0f);
  test::Sweep ours, highway;
  std::vector<float> xs;
  xs.reserve(size_t{1} << 22);
  auto flush = [&] {
    while (xs.size() % lanes != 0) xs.push_back(0.0f);
    const test::Sweep a = sweep(xs, [](D dd, hn::Vec<D> x) { return accurate_tanh(dd, x); });
    const test::Sweep b = sweep(xs, [](D dd, hn::Vec<D> x) { return highway_tanh(dd, x); });
    if (a.worst > ours.worst) ours = a;
    if (b.worst > highway.worst) highway = b;
    xs.clear();
  };
  for (uint64_t u = 0; u <= last; u += stride) {
    const float x = core::bits_float(static_cast<uint32_t>(u));
    xs.push_back(x);
    if ((u / stride) % 5 == 0) xs.push_back(-x);
    if (xs.size() >= (size_t{1} << 22)) flush();
  }
  flush();
  std::printf("[%s] tanh over [0,12] stride %u: accurate_tanh max %.3f ulp (x=%.9g), "
              "hn::Tanh max %.3f ulp (x=%.9g)\n",
              hwy::TargetName(HWY_TARGET), stride, ours.worst, ours.worst_x, highway.worst,
              highway.worst_x);
  // The spec asks for 2. Every fp32 input of [0, 12] measured 1.164 at most with FMA and 1.333
  // without (MulAdd rounding twice), Note [tanh accuracy]; the bounds sit just above those.
  EXPECT_LE(ours.worst, HWY_NATIVE_FMA ? 1.2 : 1.4) << "at x = " << ours.worst_x;
}

void TestTanhSaturatesWithoutNaN() {
  const D d;
  const size_t lanes = hn::Lanes(d);
  const float inputs[] = {10.0f, 10.5f, 20.0f, 88.0f, 1e10f, 3.4e38f,
                          std::numeric_limits<float>::infinity()};
  std::vector<float> out(lanes);
  for (const float x : inputs) {
    for (const float sign : {1.0f, -1.0f}) {
      hn::StoreU(accurate_tanh(d, hn::Set(d, sign * x)), d, out.data());
      for (size_t j = 0; j < lanes; ++j) EXPECT_EQ(out[j], sign) << "x = " << sign * x;
    }
  }
  hn::StoreU(accurate_tanh(d, hn::Set(d, -0.0f)), d, out.data());
  EXPECT_TRUE(std::signbit(out[0]) && out[0] == 0.0f);
}

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminav::simd {
HWY_BEFORE_TEST(AccurateTanh);
HWY_EXPORT_AND_TEST_P(AccurateTanh, TestTanhWithinTwoUlp);
HWY_EXPORT_AND_TEST_P(AccurateTanh, TestTanhSaturatesWithoutNaN);
}  // namespace luminav::simd
#endif
