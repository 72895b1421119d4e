// The scalar reference backend against a float64 evaluation of the spec
// written here, over every combination of mode x tau x lam x cautious x
// bound_mode x param dtype x master (one step, per-element forward-error
// bound), 100 steps (normwise relative error), the stochastic rounding keys
// and the sharded split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "luminav/luminav.h"
#include "optim/core/half_convert.h"
#include "optim/core/stochastic_hash.h"
#include "optim/core/test_step_options.h"

namespace {

using luminav::core::bf16_to_f32;
using luminav::core::f16_to_f32;
using luminav::core::f32_to_bf16_rne;
using luminav::core::f32_to_bf16_stochastic;
using luminav::core::f32_to_f16_rne;
using luminav::core::f32_to_f16_stochastic;
using luminav::core::rounding_bits;

using Options = luminav::testing::StepOptions;
using luminav::testing::hyperparams;

std::string describe(const Options& o) {
  return "mode=" + std::to_string(o.mode) + " tau=" + std::to_string(o.tau) +
         " lam=" + std::to_string(o.lam) + " cautious=" + std::to_string(o.cautious) +
         " bound=" + std::to_string(o.bound_mode) + " pdt=" + std::to_string(o.param_dtype) +
         " gdt=" + std::to_string(o.grad_dtype) + " master=" + std::to_string(o.master);
}

// The tensor state as stored: 16-bit dtypes keep their bit patterns.
struct State {
  std::vector<uint16_t> param16;
  std::vector<float> param32, grad32, m, v, master;
  std::vector<uint16_t> grad16;
  float s = 0.0f;
};

float decode(int dtype, uint16_t h) { return dtype == LUMINAV_DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h); }
uint16_t encode_rne(int dtype, float x) {
  return dtype == LUMINAV_DTYPE_BF16 ? f32_to_bf16_rne(x) : f32_to_f16_rne(x);
}

float param_value(const Options& o, const State& st, size_t i) {
  return o.param_dtype == LUMINAV_DTYPE_F32 ? st.param32[i] : decode(o.param_dtype, st.param16[i]);
}
float grad_value(const Options& o, const State& st, size_t i) {
  return o.grad_dtype == LUMINAV_DTYPE_F32 ? st.grad32[i] : decode(o.grad_dtype, st.grad16[i]);
}
// The working weight x before the step.
float weight(const Options& o, const State& st, size_t i) {
  return o.master ? st.master[i] : param_value(o, st, i);
}

void set_grads(const Options& o, State& st, std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  st.grad32.assign(n, 0.0f);
  st.grad16.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    float g = 0.1f * normal(rng);
    // Keep the new first moment away from 0, where the sign of u*g (the
    // cautious mask) would depend on rounding rather than on the formulas.
    const float m_new = 0.9f * st.m[i] + 0.1f * g;
    if (std::fabs(m_new) < 1e-4f * (0.9f * std::fabs(st.m[i]) + 0.1f * std::fabs(g))) g += 0.05f;
    if (o.grad_dtype == LUMINAV_DTYPE_F32) {
      st.grad32[i] = g;
    } else {
      st.grad16[i] = encode_rne(o.grad_dtype, g);
    }
  }
}

State random_state(const Options& o, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State st;
  st.m.resize(n);
  st.v.resize(n);
  st.param32.resize(n);
  st.param16.resize(n);
  if (o.master) st.master.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = normal(rng);
    st.m[i] = 0.05f * normal(rng);
    st.v[i] = 0.01f * std::fabs(normal(rng)) + 1e-6f;
    if (o.param_dtype == LUMINAV_DTYPE_F32) {
      st.param32[i] = x;
    } else {
      st.param16[i] = encode_rne(o.param_dtype, x);
    }
    if (o.master) st.master[i] = o.param_dtype == LUMINAV_DTYPE_F32 ? x : decode(o.param_dtype, st.param16[i]);
  }
  st.s = 0.003f;
  set_grads(o, st, rng, n);
  return st;
}

luminav_tensor tensor_of(const Options& o, State& st, size_t begin, size_t count, uint64_t seed) {
  luminav_tensor t{};
  const bool p32 = o.param_dtype == LUMINAV_DTYPE_F32;
  const bool g32 = o.grad_dtype == LUMINAV_DTYPE_F32;
  t.param = p32 ? static_cast<void*>(st.param32.data() + begin) : static_cast<void*>(st.param16.data() + begin);
  t.grad = g32 ? static_cast<const void*>(st.grad32.data() + begin)
               : static_cast<const void*>(st.grad16.data() + begin);
  t.exp_avg = st.m.data() + begin;
  t.exp_avg_sq = o.mode == LUMINAV_MODE_TDCLM ? &st.s : st.v.data() + begin;
  t.master = o.master ? st.master.data() + begin : nullptr;
  t.num_elements = count;
  t.index_offset = begin;
  t.seed = seed;
  t.param_dtype = o.param_dtype;
  t.grad_dtype = o.grad_dtype;
  t.td_factor = LUMINAV_TD_TENSOR;  // this suite's TD-CLM is version 1's scalar s
  return t;
}

luminav_options scalar_options() {
  luminav_options options{};
  options.backend = "scalar";
  options.device_type = LUMINAV_DEVICE_CPU;
  return options;
}

// ---- the float64 reference of spec/luminav-update.md ---------------------------
struct Reference {
  std::vector<double> x, m, v;  // after the step
  std::vector<double> scale_x, scale_m, scale_v;  // s_i of the accuracy contract
  double s = 0.0, scale_s = 0.0;
};

Reference reference_step(const Options& o, const State& st) {
  const size_t n = st.m.size();
  Reference r;
  r.x.resize(n);
  r.m.resize(n);
  r.v.resize(n);
  r.scale_x.resize(n);
  r.scale_m.resize(n);
  r.scale_v.resize(n);
  const double t = static_cast<double>(o.step);
  const double bc1 = 1.0 - std::pow(o.beta1, t), bc2 = 1.0 - std::pow(o.beta2, t);
  double q = 0.0;
  for (size_t i = 0; i < n; ++i) q += std::pow(static_cast<double>(grad_value(o, st, i)), 2);
  q /= static_cast<double>(n);
  r.s = o.beta2 * st.s + (1.0 - o.beta2) * q;
  r.scale_s = o.beta2 * st.s + (1.0 - o.beta2) * q;

  std::vector<double> u(n), den(n), phi(n);
  double agree = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double g = grad_value(o, st, i);
    r.m[i] = o.beta1 * st.m[i] + (1.0 - o.beta1) * g;
    r.scale_m[i] = o.beta1 * std::fabs(st.m[i]) + (1.0 - o.beta1) * std::fabs(g);
    double second;
    if (o.mode == LUMINAV_MODE_CLM) {
      r.v[i] = o.beta2 * st.v[i] + (1.0 - o.beta2) * g * g;
      r.scale_v[i] = r.v[i];
      second = r.v[i];
    } else {
      second = r.s;
    }
    const double num = (1.0 - o.lam) * r.m[i] / bc1 + o.lam * g;
    den[i] = std::sqrt(second / bc2) + o.eps;
    u[i] = num / den[i];
    if (o.tau > 0.0) u[i] = o.tau * std::tanh(u[i] / o.tau);
    phi[i] = o.cautious ? (u[i] * g > 0.0 ? 1.0 : 0.0) : 1.0;
    agree += phi[i];
  }
  const double nn = static_cast<double>(n);
  const double c = o.cautious ? nn / std::max(agree, 0.001 * nn) : 1.0;
  std::vector<double> d(n);
  double a2 = 0.0, b2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    d[i] = o.lr * u[i] * phi[i] * c;
    a2 += d[i] * d[i];
    const double x = weight(o, st, i);
    b2 += x * x;
  }
  double bound_scale = 1.0;
  if (o.bound_mode == 1) {
    const double a = std::sqrt(a2), b = std::sqrt(b2);
    if (b > 0.0 && a > o.bound_ratio * b) bound_scale = o.bound_ratio * b / a;
  }
  for (size_t i = 0; i < n; ++i) {
    const double x = weight(o, st, i);
    const double g = grad_value(o, st, i);
    double di = d[i] * bound_scale;
    if (o.bound_mode == 2) {
      const double b = o.bound_ratio * std::sqrt(x * x + 1e-4);
      di = std::clamp(di, -b, b);
    }
    r.x[i] = x * (1.0 - o.lr * o.wd) - di;
    r.scale_x[i] = std::fabs(x) * (1.0 - o.lr * o.wd) +
                   o.lr * c * ((1.0 - o.lam) * r.scale_m[i] / bc1 + o.lam * std::fabs(g)) / den[i];
  }
  return r;
}

// Spacing of the 16-bit format at |x| (one ulp).
double ulp16(int dtype, double x) {
  const int mantissa_bits = dtype == LUMINAV_DTYPE_BF16 ? 7 : 10;
  const int min_exponent = dtype == LUMINAV_DTYPE_BF16 ? -126 : -14;
  int e;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa_bits);
}

void expect_matches_reference(const Options& o, const State& before, const State& after,
                              const Reference& r) {
  const size_t n = before.m.size();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(after.m[i] - r.m[i]), 1e-6 * r.scale_m[i]) << describe(o) << " m i=" << i;
    if (o.mode == LUMINAV_MODE_CLM) {
      ASSERT_LE(std::fabs(after.v[i] - r.v[i]), 1e-6 * r.scale_v[i]) << describe(o) << " v i=" << i;
    }
    const double x_tol = 1e-6 * r.scale_x[i];
    if (o.master) {
      ASSERT_LE(std::fabs(after.master[i] - r.x[i]), x_tol) << describe(o) << " master i=" << i;
    }
    const double p = param_value(o, after, i);
    const double p_tol = o.param_dtype == LUMINAV_DTYPE_F32 ? x_tol : x_tol + ulp16(o.param_dtype, r.x[i]);
    ASSERT_LE(std::fabs(p - r.x[i]), p_tol) << describe(o) << " param i=" << i;
  }
  if (o.mode == LUMINAV_MODE_TDCLM) {
    EXPECT_LE(std::fabs(after.s - r.s), 1e-6 * r.scale_s) << describe(o);
  }
}

// The mean |lr*u| of the test data is about 1.2e-3 of |x|: this ratio makes
// the tensor and the element bound bind (BoundsBindInTheTestData).
constexpr double kBoundRatio = 4e-4;

std::vector<Options> every_combination() {
  std::vector<Options> all;
  for (int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM})
    for (double tau : {0.0, 0.5})
      for (double lam : {0.0, 0.3})
        for (int cautious : {0, 1})
          for (int bound : {0, 1, 2})
            for (int pdt : {LUMINAV_DTYPE_F32, LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16})
              for (bool master : {false, true}) {
                Options o;
                o.mode = mode;
                o.tau = tau;
                o.lam = lam;
                o.cautious = cautious;
                o.bound_mode = bound;
                // Small enough that both bounds bind for most elements.
                o.bound_ratio = bound == 0 ? 0.0 : kBoundRatio;
                o.param_dtype = pdt;
                o.grad_dtype = (pdt + static_cast<int>(all.size())) % 3;  // every grad dtype too
                o.master = master;
                all.push_back(o);
              }
  return all;
}

TEST(ScalarBackend, OneStepEveryCombinationMatchesFloat64Spec) {
  const luminav_options options = scalar_options();
  for (const Options& o : every_combination()) {
    State st = random_state(o, 777, 11);
    const State before = st;
    const Reference ref = reference_step(o, before);
    const luminav_hyperparams hp = hyperparams(o);
    luminav_tensor t = tensor_of(o, st, 0, st.m.size(), 5);
    ASSERT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK) << luminav_last_error_message();
    ASSERT_STREQ(luminav_last_backend(), "scalar");
    expect_matches_reference(o, before, st, ref);
  }
}

// The bounds must actually bind in the combinations above, or the test
// would not exercise them.
TEST(ScalarBackend, BoundsBindInTheTestData) {
  for (int bound : {1, 2}) {
    Options o;
    o.bound_mode = bound;
    o.bound_ratio = kBoundRatio;
    State st = random_state(o, 777, 11);
    Options unbounded = o;
    unbounded.bound_mode = 0;
    const Reference bounded = reference_step(o, st), open = reference_step(unbounded, st);
    double moved_bounded = 0, moved_open = 0;
    for (size_t i = 0; i < st.m.size(); ++i) {
      moved_bounded += std::fabs(bounded.x[i] - st.param32[i] * (1 - o.lr * o.wd));
      moved_open += std::fabs(open.x[i] - st.param32[i] * (1 - o.lr * o.wd));
    }
    EXPECT_LT(moved_bounded, 0.7 * moved_open) << "bound_mode " << bound;
  }
}

// 100 steps from the same state, fresh gradients each step; the reference
// stores its state in fp32 between steps as the library does.
TEST(ScalarBackend, HundredStepsNormwise) {
  const luminav_options options = scalar_options();
  for (const Options& base : every_combination()) {
    if (base.param_dtype != LUMINAV_DTYPE_F32 && !base.master) continue;  // 16-bit storage rounds
    if (base.tau != 0.0 && base.lam != 0.0 && base.bound_mode != 0) continue;  // keep it fast
    Options o = base;
    State lib = random_state(o, 200, 21);
    State ref_state = lib;
    std::mt19937 rng(77);
    for (uint64_t step = 1; step <= 100; ++step) {
      o.step = step;
      const Reference ref = reference_step(o, ref_state);
      const luminav_hyperparams hp = hyperparams(o);
      luminav_tensor t = tensor_of(o, lib, 0, lib.m.size(), 9);
      ASSERT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK) << luminav_last_error_message();
      for (size_t i = 0; i < ref.x.size(); ++i) {
        ref_state.m[i] = static_cast<float>(ref.m[i]);
        if (o.mode == LUMINAV_MODE_CLM) ref_state.v[i] = static_cast<float>(ref.v[i]);
        if (o.master) ref_state.master[i] = static_cast<float>(ref.x[i]);
        if (o.param_dtype == LUMINAV_DTYPE_F32) ref_state.param32[i] = static_cast<float>(ref.x[i]);
        else ref_state.param16[i] = encode_rne(o.param_dtype, static_cast<float>(ref.x[i]));
      }
      ref_state.s = static_cast<float>(ref.s);
      set_grads(o, lib, rng, lib.m.size());
      ref_state.grad32 = lib.grad32;
      ref_state.grad16 = lib.grad16;
    }
    auto normwise = [](const std::vector<float>& a, const std::vector<float>& b) {
      double diff = 0, top = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
        top = std::max(top, std::fabs(static_cast<double>(b[i])));
      }
      return diff / top;
    };
    const auto& lib_x = o.master ? lib.master : lib.param32;
    const auto& ref_x = o.master ? ref_state.master : ref_state.param32;
    EXPECT_LE(normwise(lib_x, ref_x), 1e-5) << describe(o);
    EXPECT_LE(normwise(lib.m, ref_state.m), 1e-5) << describe(o);
    if (o.mode == LUMINAV_MODE_CLM) EXPECT_LE(normwise(lib.v, ref_state.v), 1e-5) << describe(o);
    else EXPECT_LE(std::fabs(lib.s - ref_state.s) / ref_state.s, 1e-5) << describe(o);
  }
}

// With a master buffer the fp32 result is known exactly, so the 16-bit
// parameter must be exactly its rounding: SR keyed on (seed, step,
// index_offset + i), or RNE when stochastic rounding is off.
TEST(ScalarBackend, SixteenBitWriteBackIsTheSpecRounding) {
  const luminav_options options = scalar_options();
  for (int pdt : {LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16}) {
    for (int sr : {1, 0}) {
      Options o;
      o.param_dtype = pdt;
      o.master = true;
      o.step = 17;
      State st = random_state(o, 999, 3);
      luminav_hyperparams hp = hyperparams(o);
      hp.stochastic_rounding = sr;
      luminav_tensor t = tensor_of(o, st, 0, st.m.size(), 0xABCDEF);
      t.index_offset = 1000;  // a shard starting at element 1000
      ASSERT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK);
      int differs_from_rne = 0;
      for (size_t i = 0; i < st.m.size(); ++i) {
        const float x = st.master[i];
        uint16_t want;
        if (!sr) {
          want = encode_rne(pdt, x);
        } else {
          const uint32_t r = rounding_bits(0xABCDEF, 17, 1000 + i);
          uint32_t bits;
          std::memcpy(&bits, &x, 4);
          want = pdt == LUMINAV_DTYPE_BF16 ? static_cast<uint16_t>((bits + (r & 0xffffu)) >> 16)
                                           : f32_to_f16_stochastic(x, r);
        }
        ASSERT_EQ(st.param16[i], want) << "dtype " << pdt << " sr " << sr << " i " << i;
        differs_from_rne += st.param16[i] != encode_rne(pdt, x);
      }
      if (sr) {
        EXPECT_GT(differs_from_rne, 100);  // SR really rounds differently
      }
    }
  }
}

// Sharded: the pass-1/pass-2 split over two shards with all-reduced partials
// gives the same tensor as one whole step.
TEST(ScalarBackend, ShardedSplitEqualsWholeStep) {
  const luminav_options options = scalar_options();
  for (int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM}) {
    for (int bound : {0, 1}) {
      Options o;
      o.mode = mode;
      o.cautious = 1;
      o.bound_mode = bound;
      o.bound_ratio = bound ? kBoundRatio : 0.0;
      o.param_dtype = LUMINAV_DTYPE_BF16;
      o.master = true;
      State whole = random_state(o, 1001, 8);
      State sharded = whole;
      const luminav_hyperparams hp = hyperparams(o);
      luminav_tensor t = tensor_of(o, whole, 0, 1001, 42);
      ASSERT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK);

      // Two shards; in TD-CLM each shard holds its own copy of s.
      float s_copy = sharded.s;
      luminav_tensor shard[2] = {tensor_of(o, sharded, 0, 600, 42), tensor_of(o, sharded, 600, 401, 42)};
      if (mode == LUMINAV_MODE_TDCLM) shard[1].exp_avg_sq = &s_copy;
      const int rounds = luminav_reduction_rounds(&hp);
      ASSERT_EQ(rounds, mode == LUMINAV_MODE_TDCLM ? 2 : 1);
      luminav_globals globals{};
      const std::vector<float> m_before = sharded.m;
      for (int round = 0; round < rounds; ++round) {
        luminav_partials sum{}, part{};
        for (auto& sh : shard) {
          ASSERT_EQ(luminav_reduce(&hp, &sh, round, &globals, &part, &options), LUMINAV_STATUS_OK)
              << luminav_last_error_message();
          sum.nonfinite_count += part.nonfinite_count;
          sum.agree_count += part.agree_count;
          sum.grad_sq_sum += part.grad_sq_sum;
          sum.update_sq_sum += part.update_sq_sum;
          sum.weight_sq_sum += part.weight_sq_sum;
        }
        ASSERT_EQ(sharded.m, m_before);  // reduce writes nothing
        ASSERT_EQ(luminav_finalize(&hp, &sum, 1001, round, sharded.s, &globals), LUMINAV_STATUS_OK);
      }
      for (auto& sh : shard) ASSERT_EQ(luminav_apply(&hp, &sh, &globals, &options), LUMINAV_STATUS_OK);
      for (size_t i = 0; i < 1001; ++i) {
        ASSERT_NEAR(sharded.master[i], whole.master[i], 1e-6 * (1 + std::fabs(whole.master[i]))) << i;
        ASSERT_EQ(sharded.m[i], whole.m[i]) << i;
      }
      if (mode == LUMINAV_MODE_CLM && bound == 0) {
        // K is an integer count: the globals agree exactly, so do the bits,
        // including the SR keys of the second shard (index_offset 600).
        ASSERT_EQ(sharded.param16, whole.param16);
        ASSERT_EQ(sharded.master, whole.master);
      }
      if (mode == LUMINAV_MODE_TDCLM) {
        EXPECT_FLOAT_EQ(sharded.s, whole.s);
        EXPECT_EQ(s_copy, sharded.s);
      }
    }
  }
}

TEST(ScalarBackend, EmptyTensorIsSuccessAndTouchesNothing) {
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  luminav_tensor t{};  // all buffers NULL, N = 0
  const luminav_options options = scalar_options();
  EXPECT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK);
  EXPECT_EQ(luminav_step_multi(&hp, &t, 1, &options), LUMINAV_STATUS_OK);
  EXPECT_EQ(luminav_step_multi(&hp, nullptr, 0, &options), LUMINAV_STATUS_OK);
  hp.buffer_mode = LUMINAV_MODE_TDCLM;
  float s = 0.25f;
  t.exp_avg_sq = &s;
  EXPECT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK);
  EXPECT_EQ(s, 0.25f);
}

// With the defaults (CLM, no options) the step is AdamW; here one element
// worked out by hand: m = 0.1*g, v = 0.001*g^2, t = 1, so m/(1-b1) = g and
// v/(1-b2) = g^2: u = g/(|g| + eps) ~ sign(g); x = x(1 - lr*wd) - lr*u.
TEST(ScalarBackend, FirstAdamWStepByHand) {
  float x = 2.0f, g = -0.5f, m = 0.0f, v = 0.0f;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);  // lr 1e-3, wd 0.01, eps 1e-8
  luminav_tensor t{};
  t.param = &x;
  t.grad = &g;
  t.exp_avg = &m;
  t.exp_avg_sq = &v;
  t.num_elements = 1;
  const luminav_options options = scalar_options();
  ASSERT_EQ(luminav_step(&hp, &t, &options), LUMINAV_STATUS_OK);
  const double expected = 2.0 * (1 - 1e-3 * 0.01) + 1e-3 * 0.5 / (0.5 + 1e-8);
  EXPECT_NEAR(x, expected, 2e-7);
  EXPECT_FLOAT_EQ(m, -0.05f);
  EXPECT_FLOAT_EQ(v, 0.00025f);
}

}  // namespace
