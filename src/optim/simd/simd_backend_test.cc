// The simd backend against the scalar reference through the C API, on every
// compiled Highway target: every option combination and dtype under the
// spec's accuracy contract (and bit for bit where no tanh or reduction order
// enters), stochastic rounding bit-identical where the fp32 values agree,
// thread-count invariance (1, 2, 7), the forced backend and target really
// running, unaligned pointers, odd lengths, N = 0, multi-tensor steps and
// the finite check.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "hwy/tests/hwy_gtest.h"
#include "luminav/luminav.h"
#include "optim/core/half_convert.h"
#include "optim/core/test_step_options.h"

namespace {

using luminav::core::bf16_to_f32;
using luminav::core::f16_to_f32;
using luminav::core::f32_to_bf16_rne;
using luminav::core::f32_to_f16_rne;

using Options = luminav::testing::StepOptions;
using luminav::testing::hyperparams;

std::string describe(const Options& o, size_t n) {
  char text[256];
  std::snprintf(text, sizeof text,
                "N=%zu mode=%d tau=%g lam=%g cautious=%d bound=%d param=%d grad=%d master=%d sr=%d", n,
                o.mode, o.tau, o.lam, o.cautious, o.bound_mode, o.param_dtype, o.grad_dtype,
                o.master ? 1 : 0, o.stochastic_rounding);
  return text;
}


size_t dtype_bytes(int dtype) { return dtype == LUMINAV_DTYPE_F32 ? 4 : 2; }

float decode(int dtype, const uint8_t* base, size_t i) {
  if (dtype == LUMINAV_DTYPE_F32) {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, base + 2 * i, 2);
  return dtype == LUMINAV_DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

void encode(int dtype, uint8_t* base, size_t i, float x) {
  if (dtype == LUMINAV_DTYPE_F32) {
    std::memcpy(base + 4 * i, &x, 4);
  } else {
    const uint16_t h = dtype == LUMINAV_DTYPE_BF16 ? f32_to_bf16_rne(x) : f32_to_f16_rne(x);
    std::memcpy(base + 2 * i, &h, 2);
  }
}

// One tensor's buffers. `shift` elements of padding in front of each buffer
// make the pointers unaligned to any vector width.
struct State {
  Options o;
  size_t n = 0, shift = 0;
  std::vector<uint8_t> param, grad;
  std::vector<float> m, v, master;

  uint8_t* param_at() { return param.data() + shift * dtype_bytes(o.param_dtype); }
  const uint8_t* param_at() const { return param.data() + shift * dtype_bytes(o.param_dtype); }
  const uint8_t* grad_at() const { return grad.data() + shift * dtype_bytes(o.grad_dtype); }
  float x(size_t i) const { return o.master ? master[shift + i] : decode(o.param_dtype, param_at(), i); }

  luminav_tensor tensor(uint64_t seed = 1234) {
    luminav_tensor t{};
    t.param = param_at();
    t.grad = grad.data() + shift * dtype_bytes(o.grad_dtype);
    t.exp_avg = m.data() + shift;
    t.exp_avg_sq = v.data() + shift;
    t.master = o.master ? master.data() + shift : nullptr;
    t.num_elements = n;
    t.seed = seed;
    t.param_dtype = o.param_dtype;
    t.grad_dtype = o.grad_dtype;
    t.td_factor = LUMINAV_TD_TENSOR;  // this suite's TD-CLM is version 1's scalar s
    return t;
  }
};

State random_state(const Options& o, size_t n, uint32_t seed, size_t shift = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State st;
  st.o = o;
  st.n = n;
  st.shift = shift;
  const size_t total = n + shift;
  st.param.assign(total * dtype_bytes(o.param_dtype), 0);
  st.grad.assign(total * dtype_bytes(o.grad_dtype), 0);
  st.m.assign(total, 0.0f);
  st.v.assign(o.mode == LUMINAV_MODE_CLM ? total : shift + 1, 0.0f);
  if (o.master) st.master.assign(total, 0.0f);
  if (o.mode == LUMINAV_MODE_TDCLM) st.v[shift] = 0.003f;
  for (size_t i = 0; i < n; ++i) {
    const float x = normal(rng);
    encode(o.param_dtype, st.param_at(), i, x);
    if (o.master) st.master[shift + i] = decode(o.param_dtype, st.param_at(), i);
    const float m_old = 0.05f * normal(rng);
    st.m[shift + i] = m_old;
    if (o.mode == LUMINAV_MODE_CLM) st.v[shift + i] = 0.01f * std::fabs(normal(rng)) + 1e-6f;
    float g = (i % 13 == 5) ? 0.0f : 0.1f * normal(rng);
    // Keep the new first moment away from 0, where the cautious mask would
    // follow rounding rather than the formulas.
    const float m_new = 0.9f * m_old + 0.1f * g;
    if (std::fabs(m_new) < 1e-3f * (0.9f * std::fabs(m_old) + 0.1f * std::fabs(g))) g += 0.05f;
    encode(o.grad_dtype, st.grad.data() + shift * dtype_bytes(o.grad_dtype), i, g);
  }
  return st;
}

int run_step(const char* backend, const Options& o, State& st) {
  luminav_options options{};
  options.backend = backend;
  const luminav_hyperparams hp = hyperparams(o);
  const luminav_tensor t = st.tensor();
  return luminav_step(&hp, &t, &options);
}

// The spec's accuracy contract between backends (forward-error bound per
// element, Note "Accuracy contract" of spec/luminav-update.md), with `ref`
// the scalar backend's result from `before`. bit_exact: the lanes must be
// identical (no tanh, no reduction feeding the elements). 16-bit parameters
// without a master: the decoded values may differ by one 16-bit step where
// the fp32 values differ; with a master, the parameter bits must agree
// wherever the master (the fp32 value) agrees.
void expect_contract(const State& before, const State& ref, const State& got, bool bit_exact,
                     const std::string& what) {
  const Options& o = before.o;
  const size_t n = before.n;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(o.step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(o.step));
  const size_t sh = before.shift;
  // c = N / max(K, 0.001 N), K from the sign of the reference numerator.
  double c = 1.0;
  if (o.cautious) {
    double agree = 0;
    for (size_t i = 0; i < n; ++i) {
      const double g = decode(o.grad_dtype, before.grad_at(), i);
      const double num = (1 - o.lam) * ref.m[sh + i] / bc1 + o.lam * g;
      agree += (num * g > 0) ? 1 : 0;
    }
    c = n / std::max(agree, 0.001 * n) * 1.01;
  }
  size_t failures = 0;
  auto check = [&](const char* field, size_t i, double a, double b, double scale) {
    if (bit_exact ? std::memcmp(&a, &b, sizeof a) != 0 : !(std::fabs(a - b) <= 1e-6 * scale)) {
      if (++failures <= 4) {
        ADD_FAILURE() << what << ": " << field << "[" << i << "] simd " << a << " scalar " << b
                      << " bound " << 1e-6 * scale;
      }
    }
  };
  const float s_new = o.mode == LUMINAV_MODE_TDCLM ? ref.v[sh] : 0.0f;
  if (o.mode == LUMINAV_MODE_TDCLM && n > 0) {
    const double q_scale = 1.0;  // s: beta2*s_old + (1-beta2)*q, q = mean g^2
    double q = 0;
    for (size_t i = 0; i < n; ++i) {
      const double g = decode(o.grad_dtype, before.grad_at(), i);
      q += g * g;
    }
    q /= n;
    check("s", 0, got.v[sh], ref.v[sh], (o.beta2 * before.v[sh] + (1 - o.beta2) * q) * q_scale);
  }
  for (size_t i = 0; i < n; ++i) {
    const double g = decode(o.grad_dtype, before.grad_at(), i);
    const double sm = o.beta1 * std::fabs(before.m[sh + i]) + (1 - o.beta1) * std::fabs(g);
    check("m", i, got.m[sh + i], ref.m[sh + i], sm);
    double second = s_new;
    if (o.mode == LUMINAV_MODE_CLM) {
      check("v", i, got.v[sh + i], ref.v[sh + i], o.beta2 * before.v[sh + i] + (1 - o.beta2) * g * g);
      second = ref.v[sh + i];
    }
    const double den = std::sqrt(second / bc2) + o.eps;
    const double sx = std::fabs(before.x(i)) * (1 - o.lr * o.wd) +
                      o.lr * c * ((1 - o.lam) * sm / bc1 + o.lam * std::fabs(g)) / den;
    if (o.param_dtype == LUMINAV_DTYPE_F32 || o.master) {
      check("x", i, got.x(i), ref.x(i), sx);
    }
    if (o.param_dtype != LUMINAV_DTYPE_F32) {
      uint16_t a, b;
      std::memcpy(&a, got.param_at() + 2 * i, 2);
      std::memcpy(&b, ref.param_at() + 2 * i, 2);
      if (o.master) {
        if (got.master[sh + i] == ref.master[sh + i] && a != b && ++failures <= 4) {
          ADD_FAILURE() << what << ": param bits [" << i << "] differ where the fp32 values agree";
        }
      } else if (a != b) {
        // fp32 values unseen: the 16-bit results may differ by one step.
        const int step_apart = std::abs(static_cast<int>(a & 0x7fff) - static_cast<int>(b & 0x7fff));
        if ((bit_exact || step_apart > 1 || (a & 0x8000) != (b & 0x8000)) && ++failures <= 4) {
          ADD_FAILURE() << what << ": param bits [" << i << "] " << a << " vs " << b;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0u) << what;
}

// Runs one case on both backends and compares.
void compare_backends(const Options& o, size_t n, uint32_t seed) {
  const State before = random_state(o, n, seed);
  State ref = before, got = before;
  const std::string what = describe(o, n);
  ASSERT_EQ(run_step("scalar", o, ref), LUMINAV_STATUS_OK) << what << luminav_last_error_message();
  ASSERT_EQ(run_step("simd", o, got), LUMINAV_STATUS_OK) << what << luminav_last_error_message();
  // No tanh and no reduction that feeds the elements (TD-CLM's s, the
  // cautious scale, the tensor bound): the lanes are the scalar arithmetic.
  const bool bit_exact = o.tau == 0.0 && o.mode == LUMINAV_MODE_CLM && !o.cautious &&
                         o.bound_mode != LUMINAV_BOUND_TENSOR;
  expect_contract(before, ref, got, bit_exact, what);
}

class SimdBackendTarget : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(SimdBackendTarget);

std::string expected_label() {
  return std::string("simd:") + hwy::TargetName(hwy::SupportedAndGeneratedTargets().front());
}

TEST_P(SimdBackendTarget, ForcedTargetReallyRuns) {
  Options o;
  State st = random_state(o, 100, 1);
  ASSERT_EQ(run_step("simd", o, st), LUMINAV_STATUS_OK) << luminav_last_error_message();
  EXPECT_EQ(std::string(luminav_last_backend()), std::string("simd:") + hwy::TargetName(GetParam()));
  ASSERT_EQ(run_step("scalar", o, st), LUMINAV_STATUS_OK);
  EXPECT_EQ(std::string(luminav_last_backend()), "scalar");
}

TEST_P(SimdBackendTarget, EveryOptionCombinationMatchesScalar) {
  const int dtypes[] = {LUMINAV_DTYPE_F32, LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16};
  uint32_t seed = 10;
  for (const int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM}) {
    for (const double tau : {0.0, 0.5}) {
      for (const double lam : {0.0, 0.3}) {
        for (const int cautious : {0, 1}) {
          for (const int bound : {0, 1, 2}) {
            for (const int pd : dtypes) {
              for (const bool master : {false, true}) {
                if (pd == LUMINAV_DTYPE_F32 && master) continue;
                Options o;
                o.mode = mode;
                o.tau = tau;
                o.lam = lam;
                o.cautious = cautious;
                o.bound_mode = bound;
                o.bound_ratio = bound == 1 ? 1e-3 : 0.02;
                o.param_dtype = pd;
                o.grad_dtype = dtypes[seed % 3];
                o.master = master;
                // 1003: odd, several vectors and a tail on every target.
                compare_backends(o, 1003, ++seed);
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(SimdBackendTarget, OddLengthsAndEmpty) {
  for (const size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{65537}}) {
    for (const int pd : {LUMINAV_DTYPE_F32, LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16}) {
      Options o;
      o.param_dtype = pd;
      o.grad_dtype = pd;
      compare_backends(o, n, static_cast<uint32_t>(n + pd));
      o.mode = LUMINAV_MODE_TDCLM;
      o.cautious = 1;
      o.tau = 0.1;
      compare_backends(o, n, static_cast<uint32_t>(n + pd + 7));
    }
  }
}

TEST_P(SimdBackendTarget, StochasticRoundingBitsMatchScalarWhereFp32Agrees) {
  for (const int pd : {LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16}) {
    Options o;
    o.param_dtype = pd;
    o.master = true;
    o.tau = 0.05;  // tanh differs from tanhf in the last bit now and then
    o.step = 7;
    const State before = random_state(o, 4099, 77);
    State ref = before, got = before;
    ASSERT_EQ(run_step("scalar", o, ref), LUMINAV_STATUS_OK);
    ASSERT_EQ(run_step("simd", o, got), LUMINAV_STATUS_OK);
    size_t agree = 0, rounded_up = 0;
    for (size_t i = 0; i < before.n; ++i) {
      if (got.master[1 + i] != ref.master[1 + i]) continue;
      ++agree;
      uint16_t a, b;
      std::memcpy(&a, got.param_at() + 2 * i, 2);
      std::memcpy(&b, ref.param_at() + 2 * i, 2);
      ASSERT_EQ(a, b) << "element " << i;
      rounded_up += std::fabs(decode(pd, got.param_at(), i)) > std::fabs(got.master[1 + i]);
    }
    EXPECT_GT(agree, before.n * 9 / 10);
    // Stochastic, not nearest: a fair share of values rounds away from zero.
    EXPECT_GT(rounded_up, agree / 5);
  }
}

TEST_P(SimdBackendTarget, MultiTensorStepMatchesScalar) {
  const size_t sizes[] = {1, 300, 17, 70001, 5, 64, 1000};
  const int dtypes[] = {LUMINAV_DTYPE_F32, LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16};
  for (const int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM}) {
    std::vector<State> before, ref, got;
    for (size_t i = 0; i < std::size(sizes); ++i) {
      Options o;
      o.mode = mode;
      o.cautious = mode == LUMINAV_MODE_TDCLM;
      o.param_dtype = dtypes[i % 3];
      o.grad_dtype = dtypes[(i + 1) % 3];
      o.master = o.param_dtype != LUMINAV_DTYPE_F32 && i % 2 == 0;
      before.push_back(random_state(o, sizes[i], static_cast<uint32_t>(100 + i), i % 3));
    }
    ref = before;
    got = before;
    auto run = [&](const char* backend, std::vector<State>& states) {
      std::vector<luminav_tensor> tensors;
      for (size_t i = 0; i < states.size(); ++i) tensors.push_back(states[i].tensor(500 + i));
      luminav_options options{};
      options.backend = backend;
      const luminav_hyperparams hp = hyperparams(states[0].o);
      return luminav_step_multi(&hp, tensors.data(), tensors.size(), &options);
    };
    ASSERT_EQ(run("scalar", ref), LUMINAV_STATUS_OK) << luminav_last_error_message();
    ASSERT_EQ(run("simd", got), LUMINAV_STATUS_OK) << luminav_last_error_message();
    for (size_t i = 0; i < before.size(); ++i) {
      expect_contract(before[i], ref[i], got[i], mode == LUMINAV_MODE_CLM,
                      "multi tensor " + std::to_string(i) + " " + describe(before[i].o, before[i].n));
    }
  }
}

// Both modes: a whole CLM step's pass 1 is the finite check alone (no sum of
// squares, StepConstants::grad_sq_wanted), TD-CLM's also sums g^2.
TEST_P(SimdBackendTarget, NonFiniteGradientWritesNothing) {
  for (const int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM})
  for (const size_t bad : {size_t{3}, size_t{70000}, size_t{(1u << 17) + 2}}) {
    Options o;
    o.mode = mode;
    const State before = random_state(o, (1u << 17) + 3, 5);
    State st = before;
    const float nan = std::nanf("");
    std::memcpy(st.grad.data() + 4 * (st.shift + bad), &nan, 4);
    State poisoned = st;
    EXPECT_EQ(run_step("simd", o, st), LUMINAV_STATUS_NONFINITE_GRAD);
    EXPECT_EQ(st.param, poisoned.param);
    EXPECT_EQ(st.m, poisoned.m);
    EXPECT_EQ(st.v, poisoned.v);
  }
}

// Pass 1 counts NaN, +Inf and -Inf wherever they sit (vector body, the last
// partial vector, fp32 and 16-bit gradients): the count is checked against
// the number planted, and large finite values are not counted.
TEST_P(SimdBackendTarget, NonFiniteCountIsExact) {
  for (const int grad_dtype : {LUMINAV_DTYPE_F32, LUMINAV_DTYPE_BF16, LUMINAV_DTYPE_F16}) {
    Options o;
    o.param_dtype = grad_dtype;
    o.grad_dtype = grad_dtype;
    o.master = grad_dtype != LUMINAV_DTYPE_F32;
    const size_t n = (1u << 17) + 13;
    State st = random_state(o, n, 11);
    const size_t bytes = dtype_bytes(grad_dtype);
    // Bit patterns: +Inf, -Inf, a quiet NaN, and the largest finite value.
    const uint32_t f32_bits[] = {0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f7fffffu};
    const uint16_t bf16_bits[] = {0x7f80, 0xff80, 0x7fc1, 0x7f7f};
    const uint16_t f16_bits[] = {0x7c00, 0xfc00, 0x7e01, 0x7bff};
    const size_t at[] = {0, 17, 65535, n - 1};
    uint8_t* grad = st.grad.data() + st.shift * bytes;
    for (size_t j = 0; j < 4; ++j) {
      const void* src = grad_dtype == LUMINAV_DTYPE_F32 ? static_cast<const void*>(&f32_bits[j])
                        : grad_dtype == LUMINAV_DTYPE_BF16 ? static_cast<const void*>(&bf16_bits[j])
                                                           : static_cast<const void*>(&f16_bits[j]);
      std::memcpy(grad + at[j] * bytes, src, bytes);
    }
    const luminav_hyperparams hp = hyperparams(o);
    const luminav_tensor t = st.tensor();
    luminav_globals globals{};
    luminav_partials out{};
    luminav_options simd{};
    simd.backend = "simd";
    ASSERT_EQ(luminav_reduce(&hp, &t, 0, &globals, &out, &simd), LUMINAV_STATUS_OK);
    EXPECT_EQ(out.nonfinite_count, 3u) << "grad dtype " << grad_dtype;
  }
}

// Thread counts 1, 2 and 7 give the same bits, on a tensor of 2^21 + 3
// elements (two reduction chunks, 33 tiles) with every reduction in play.
TEST(SimdBackend, ThreadCountInvariance) {
  Options o;
  o.mode = LUMINAV_MODE_TDCLM;
  o.cautious = 1;
  o.bound_mode = LUMINAV_BOUND_TENSOR;
  o.bound_ratio = 1e-3;
  o.tau = 0.2;
  o.param_dtype = LUMINAV_DTYPE_BF16;
  o.grad_dtype = LUMINAV_DTYPE_BF16;
  o.master = true;
  const size_t n = (size_t{1} << 21) + 3;
  const State before = random_state(o, n, 42, 3);
  const int saved = luminav_get_num_threads();
  std::vector<State> results;
  std::vector<luminav_partials> partials;
  for (const int threads : {1, 2, 7}) {
    luminav_set_num_threads(threads);
    EXPECT_EQ(luminav_get_num_threads(), threads);
    State st = before;
    // The round-0 partials themselves, then the whole step.
    luminav_options options{};
    options.backend = "simd";
    const luminav_hyperparams hp = hyperparams(o);
    luminav_tensor t = st.tensor();
    luminav_globals globals{};
    luminav_partials p{};
    ASSERT_EQ(luminav_reduce(&hp, &t, 0, &globals, &p, &options), LUMINAV_STATUS_OK)
        << luminav_last_error_message();
    partials.push_back(p);
    ASSERT_EQ(run_step("simd", o, st), LUMINAV_STATUS_OK) << luminav_last_error_message();
    results.push_back(std::move(st));
  }
  luminav_set_num_threads(saved);
  for (size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(std::memcmp(&partials[r], &partials[0], sizeof(luminav_partials)), 0);
    EXPECT_TRUE(results[r].param == results[0].param) << "param differs, run " << r;
    EXPECT_TRUE(results[r].master == results[0].master) << "master differs, run " << r;
    EXPECT_TRUE(results[r].m == results[0].m) << "m differs, run " << r;
    EXPECT_TRUE(results[r].v == results[0].v) << "s differs, run " << r;
  }
  // And the whole thing still meets the contract against the scalar backend.
  State ref = before;
  ASSERT_EQ(run_step("scalar", o, ref), LUMINAV_STATUS_OK);
  expect_contract(before, ref, results[1], false, "2^21+3 threads");
}

// Round 0's partials of one tensor on the named backend (a CLM step's one round).
luminav_partials round0_partials(const char* backend, const Options& o, State& st) {
  const luminav_hyperparams hp = hyperparams(o);
  const luminav_tensor t = st.tensor();
  luminav_globals globals{};
  luminav_options options{};
  options.backend = backend;
  luminav_partials out{};
  EXPECT_EQ(luminav_reduce(&hp, &t, 0, &globals, &out, &options), LUMINAV_STATUS_OK) << backend;
  return out;
}

// The cautious mask's round reads the parameters only for the tensor bound's
// ||x||: without that bound, parameters of NaN change no partial (K as the
// scalar backend counts it from finite ones), and sum x^2 is left 0.
TEST(SimdBackend, CautiousRoundWithoutTheTensorBoundLeavesTheParametersUnread) {
  Options o;
  o.mode = LUMINAV_MODE_CLM;
  o.cautious = 1;
  State finite = random_state(o, 100003, 9);
  State poisoned = finite;
  for (size_t i = 0; i < poisoned.n; ++i) encode(o.param_dtype, poisoned.param_at(), i, std::nanf(""));
  const luminav_partials a = round0_partials("simd", o, poisoned);
  const luminav_partials b = round0_partials("scalar", o, finite);
  EXPECT_EQ(a.agree_count, b.agree_count);
  EXPECT_GT(a.agree_count, 0u);
  EXPECT_NEAR(a.update_sq_sum, b.update_sq_sum, 1e-12 * b.update_sq_sum);
  EXPECT_EQ(a.weight_sq_sum, 0.0);
  EXPECT_EQ(b.weight_sq_sum, 0.0);
}

// Pass-1 partials against the scalar backend's: counts exact, sums to 1e-12.
TEST(SimdBackend, PartialsMatchScalar) {
  Options o;
  o.mode = LUMINAV_MODE_CLM;
  o.cautious = 1;
  o.bound_mode = LUMINAV_BOUND_TENSOR;
  o.bound_ratio = 1e-3;
  State st = random_state(o, 200003, 8);
  const luminav_partials a = round0_partials("simd", o, st);
  const luminav_partials b = round0_partials("scalar", o, st);
  EXPECT_EQ(a.nonfinite_count, b.nonfinite_count);
  EXPECT_EQ(a.agree_count, b.agree_count);
  EXPECT_GT(a.agree_count, 0u);
  EXPECT_NEAR(a.grad_sq_sum, b.grad_sq_sum, 1e-12 * b.grad_sq_sum);
  EXPECT_NEAR(a.update_sq_sum, b.update_sq_sum, 1e-12 * b.update_sq_sum);
  EXPECT_NEAR(a.weight_sq_sum, b.weight_sq_sum, 1e-12 * b.weight_sq_sum);
  EXPECT_GT(a.weight_sq_sum, 0.0);
}

TEST(SimdBackend, ChosenByDefaultAndNamedWithItsTarget) {
  Options o;
  State st = random_state(o, 50, 3);
  ASSERT_EQ(run_step(nullptr, o, st), LUMINAV_STATUS_OK);
  EXPECT_EQ(std::string(luminav_last_backend()), expected_label());
}

}  // namespace
