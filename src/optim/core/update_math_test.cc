// The scalar policy of the per-element math: tanh accuracy and saturation
// (spec: 2 ulp over the whole range, +-1 at the ends, never NaN), and the
// element functions against the spec's formulas in double.
#include "optim/core/update_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace luminav::core {
namespace {

// Distance in representable floats (monotone integer ordering of floats).
int64_t ordered(float x) {
  int32_t i;
  std::memcpy(&i, &x, 4);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

// Note [scalar tanh accuracy] (update_math.h): the host evaluates in double and rounds once, so it
// agrees with the correctly rounded value (at most 1 ulp from it in the worst
// double-rounding case), well inside the spec's 2 ulp.
TEST(UpdateMath, TanhWithinTwoUlpEverywhere) {
  const ScalarOps o;
  int64_t worst = 0;
  // Every 397th positive float up to +Inf, and its negative.
  for (uint64_t u = 0; u < 0x7f800000u; u += 397) {
    float x;
    const uint32_t bits = static_cast<uint32_t>(u);
    std::memcpy(&x, &bits, 4);
    for (float v : {x, -x}) {
      const float got = o.tanh(v);
      ASSERT_FALSE(std::isnan(got)) << v;
      const float want = static_cast<float>(std::tanh(static_cast<double>(v)));
      const int64_t ulps = std::llabs(ordered(got) - ordered(want));
      worst = std::max(worst, ulps);
      ASSERT_LE(ulps, 2) << "tanh(" << v << ") = " << got << ", want " << want;
    }
  }
  EXPECT_LE(worst, 1);
  EXPECT_EQ(o.tanh(INFINITY), 1.0f);
  EXPECT_EQ(o.tanh(-INFINITY), -1.0f);
  EXPECT_EQ(o.tanh(1e30f), 1.0f);
  EXPECT_EQ(o.tanh(-20.0f), -1.0f);
}

StepConstants constants(double lr, double b1, double b2, double eps, double wd, double lam,
                        double tau, uint64_t t) {
  StepConstants k{};
  k.lr = static_cast<float>(lr);
  k.beta1 = static_cast<float>(b1);
  k.beta2 = static_cast<float>(b2);
  k.one_minus_beta1 = static_cast<float>(1 - b1);
  k.one_minus_beta2 = static_cast<float>(1 - b2);
  k.eps = static_cast<float>(eps);
  k.decay_factor = static_cast<float>(1 - lr * wd);
  k.inv_bias_correction1 = static_cast<float>(1 / (1 - std::pow(b1, static_cast<double>(t))));
  k.inv_bias_correction2 = static_cast<float>(1 / (1 - std::pow(b2, static_cast<double>(t))));
  k.lam = static_cast<float>(lam);
  k.one_minus_lam = static_cast<float>(1 - lam);
  k.tau = static_cast<float>(tau);
  k.inv_grad_scale = 1.0f;
  k.step = t;
  return k;
}

// One element of CLM with lam and tau, by the spec's formulas in double.
TEST(UpdateMath, ClmElementMatchesTheFormulas) {
  const ScalarOps o;
  const StepConstants k = constants(0.01, 0.9, 0.99, 1e-8, 0.1, 0.25, 0.3, 4);
  const TensorGlobals gl;
  const float m_old = 0.02f, v_old = 0.003f, g = -0.4f, x = 1.5f;
  const auto e = moments_and_update(o, k, gl, m_old, v_old, g);
  const double m = 0.9 * m_old + 0.1 * g, v = 0.99 * v_old + 0.01 * g * g;
  const double n = 0.75 * m / (1 - std::pow(0.9, 4)) + 0.25 * g;
  double u = n / (std::sqrt(v / (1 - std::pow(0.99, 4))) + 1e-8);
  u = 0.3 * std::tanh(u / 0.3);
  EXPECT_NEAR(e.m, m, 1e-7 * 0.1);
  EXPECT_NEAR(e.v, v, 1e-7 * 0.01);
  EXPECT_NEAR(e.u, u, 1e-6 * std::fabs(u));
  const float x_new = apply_update(o, k, gl, x, e.u, g);
  EXPECT_NEAR(x_new, x * (1 - 0.01 * 0.1) - 0.01 * u, 1e-6 * 1.5);
}

// The cautious mask keeps u only where u*g > 0 and scales by c; the element
// bound clamps to bound_ratio * sqrt(x^2 + 1e-4).
TEST(UpdateMath, CautiousMaskAndElementBound) {
  const ScalarOps o;
  StepConstants k = constants(0.1, 0.9, 0.999, 1e-8, 0.0, 0.0, 0.0, 1);
  k.cautious = 1;
  TensorGlobals gl;
  gl.cautious_scale = 4.0f;
  EXPECT_EQ(apply_update(o, k, gl, 1.0f, 0.5f, -1.0f), 1.0f);  // disagreeing: no step
  EXPECT_FLOAT_EQ(apply_update(o, k, gl, 1.0f, 0.5f, 2.0f), 1.0f - 0.1f * 0.5f * 4.0f);
  EXPECT_EQ(unscaled_step(o, k, 0.5f, -1.0f), 0.0f);
  k.cautious = 0;
  k.bound_mode = 2;
  k.bound_ratio = 0.01f;
  // |d| = 0.1 * 3 = 0.3 > 0.01 * sqrt(4 + 1e-4): clamped.
  EXPECT_NEAR(apply_update(o, k, gl, 2.0f, 3.0f, 1.0f), 2.0 - 0.01 * std::sqrt(4.0001), 1e-6);
  EXPECT_NEAR(apply_update(o, k, gl, 2.0f, -3.0f, 1.0f), 2.0 + 0.01 * std::sqrt(4.0001), 1e-6);
  // x = 0 still allows a step of 0.01 * sqrt(1e-4) = 1e-4.
  EXPECT_NEAR(apply_update(o, k, gl, 0.0f, 1.0f, 1.0f), -1e-4, 1e-9);
}

}  // namespace
}  // namespace luminav::core
