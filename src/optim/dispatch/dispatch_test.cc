// The dispatcher through the C API: forced and automatic backend choice,
// LUMINAV_FORCE_BACKEND, the last backend, introspection, threads and CPU
// features.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "luminav/luminav.h"

namespace {

struct SmallTensor {
  std::vector<float> param = std::vector<float>(32, 1.0f), grad = std::vector<float>(32, 0.5f),
                     m = std::vector<float>(32, 0.0f), v = std::vector<float>(32, 0.0f);
  luminav_tensor t{};
  SmallTensor() {
    t.param = param.data();
    t.grad = grad.data();
    t.exp_avg = m.data();
    t.exp_avg_sq = v.data();
    t.num_elements = param.size();
  }
};

int index_of(const std::string& name) {
  for (int i = 0; i < luminav_backend_count(); ++i) {
    if (name == luminav_backend_name(i)) return i;
  }
  return -1;
}

TEST(Dispatch, ScalarIsAlwaysThereAndAvailable) {
  const int scalar = index_of("scalar");
  ASSERT_EQ(scalar, 0);
  EXPECT_EQ(luminav_backend_available(scalar), 1);
  EXPECT_STREQ(luminav_backend_unavailable_reason(scalar), "");
  for (int i = 0; i < luminav_backend_count(); ++i) {
    // An unavailable backend always says why, in one line.
    const std::string why = luminav_backend_unavailable_reason(i);
    EXPECT_EQ(luminav_backend_available(i) != 0, why.empty()) << luminav_backend_name(i);
    EXPECT_EQ(why.find('\n'), std::string::npos);
  }
  EXPECT_STREQ(luminav_backend_name(-1), "");
  EXPECT_STREQ(luminav_backend_name(luminav_backend_count()), "");
}

TEST(Dispatch, ForcedBackendRunsAndIsReported) {
  SmallTensor s;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  luminav_options options{};
  options.backend = "scalar";
  ASSERT_EQ(luminav_step(&hp, &s.t, &options), LUMINAV_STATUS_OK);
  EXPECT_STREQ(luminav_last_backend(), "scalar");
}

TEST(Dispatch, AutoOnHostMemoryPicksSimdWhenAvailableElseScalar) {
  SmallTensor s;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  ::unsetenv("LUMINAV_FORCE_BACKEND");
  ASSERT_EQ(luminav_step(&hp, &s.t, nullptr), LUMINAV_STATUS_OK);
  const std::string ran = luminav_last_backend();
  const int simd = index_of("simd");
  if (simd >= 0 && luminav_backend_available(simd)) {
    EXPECT_EQ(ran.rfind("simd", 0), 0u) << ran;
  } else {
    EXPECT_EQ(ran, "scalar");
  }
}

TEST(Dispatch, EnvironmentForcesTheBackend) {
  SmallTensor s;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  ::setenv("LUMINAV_FORCE_BACKEND", "scalar", 1);
  EXPECT_EQ(luminav_step(&hp, &s.t, nullptr), LUMINAV_STATUS_OK);
  EXPECT_STREQ(luminav_last_backend(), "scalar");
  ::setenv("LUMINAV_FORCE_BACKEND", "no-such-backend", 1);
  const std::vector<float> before = s.param;
  EXPECT_EQ(luminav_step(&hp, &s.t, nullptr), LUMINAV_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(luminav_last_error_message()).find("no-such-backend"), std::string::npos);
  EXPECT_EQ(s.param, before);
  // An explicit options->backend wins over the environment.
  luminav_options options{};
  options.backend = "scalar";
  EXPECT_EQ(luminav_step(&hp, &s.t, &options), LUMINAV_STATUS_OK);
  ::unsetenv("LUMINAV_FORCE_BACKEND");
}

TEST(Dispatch, CudaMemoryNeedsTheCudaBackend) {
  SmallTensor s;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  const int cuda = index_of("cuda");
  if (cuda >= 0 && luminav_backend_available(cuda)) GTEST_SKIP() << "a GPU is present";
  luminav_options options{};
  options.device_type = LUMINAV_DEVICE_CUDA;
  const std::vector<float> before = s.param;
  EXPECT_EQ(luminav_step(&hp, &s.t, &options), LUMINAV_STATUS_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(luminav_last_error_message()).find("cuda"), std::string::npos);
  EXPECT_EQ(s.param, before);
}

TEST(Dispatch, ThreadSetting) {
  const int initial = luminav_get_num_threads();
  EXPECT_GE(initial, 1);
  EXPECT_EQ(luminav_set_num_threads(3), 0);  // 0: it was the default
  EXPECT_EQ(luminav_get_num_threads(), 3);
  EXPECT_EQ(luminav_set_num_threads(-2), -LUMINAV_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(luminav_last_error_message()).find("num_threads"), std::string::npos);
  EXPECT_EQ(luminav_get_num_threads(), 3);
  EXPECT_EQ(luminav_set_num_threads(0), 3);
  EXPECT_EQ(luminav_get_num_threads(), initial);
}

// LUMINAV_NUM_THREADS is read once per process: check it in a fresh one
// (the threadsafe death-test style re-executes this binary for the child).
TEST(Dispatch, NumThreadsEnvironmentDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("LUMINAV_NUM_THREADS", "5", 1);
        std::exit(luminav_get_num_threads());
      },
      ::testing::ExitedWithCode(5), "");
  EXPECT_EXIT(
      {
        ::setenv("LUMINAV_NUM_THREADS", "not-a-number", 1);
        std::exit(luminav_get_num_threads() >= 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// "auto" falling back from simd to scalar says why on stderr, once, when
// LUMINAV_LOG is set (checked in a fresh process).
TEST(Dispatch, FallbackIsLoggedWhenAsked) {
  const int simd = index_of("simd");
  if (simd >= 0 && luminav_backend_available(simd)) GTEST_SKIP() << "simd runs here: no fallback";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("LUMINAV_LOG", "1", 1);
        ::unsetenv("LUMINAV_FORCE_BACKEND");
        SmallTensor s;
        luminav_hyperparams hp;
        luminav_hyperparams_init(&hp);
        const int first = luminav_step(&hp, &s.t, nullptr);
        const int second = luminav_step(&hp, &s.t, nullptr);
        std::exit(first == 0 && second == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "luminav: simd backend .*; using scalar");
}

TEST(Dispatch, CpuFeaturesAndArch) {
  const std::string features = luminav_cpu_features();
  LuminaVTritonEngine* engine = luminav_triton_engine_create();
  ASSERT_NE(engine, nullptr);
  const std::string arch = luminav_triton_get_arch(engine);
  EXPECT_STREQ(luminav_triton_get_platform(engine), "cpu");
#if defined(__x86_64__)
  EXPECT_NE(features.find("sse2"), std::string::npos) << features;  // baseline of x86-64
  const bool avx512 = features.find("avx512f") != std::string::npos &&
                      features.find("avx512bw") != std::string::npos &&
                      features.find("avx512dq") != std::string::npos &&
                      features.find("avx512vl") != std::string::npos;
  const bool avx2 = features.find("avx2") != std::string::npos && features.find("fma") != std::string::npos;
  EXPECT_EQ(arch, avx512 ? "x86_64-avx512" : avx2 ? "x86_64-avx2" : arch) << features;
#if defined(__AVX2__)
  EXPECT_NE(features.find("avx2"), std::string::npos);  // the compiler was told it is there
#endif
#endif
  EXPECT_FALSE(arch.empty());
  luminav_triton_engine_destroy(engine);
  EXPECT_STREQ(luminav_triton_get_platform(nullptr), "");
}

TEST(Dispatch, StatusNamesAndVersion) {
  EXPECT_STREQ(luminav_status_name(LUMINAV_STATUS_OK), "OK");
  EXPECT_STREQ(luminav_status_name(LUMINAV_STATUS_BACKEND_UNAVAILABLE), "BACKEND_UNAVAILABLE");
  EXPECT_STREQ(luminav_status_name(LUMINAV_STATUS_OUT_OF_MEMORY), "OUT_OF_MEMORY");
  EXPECT_STREQ(luminav_status_name(99), "UNKNOWN_STATUS");
  EXPECT_EQ(std::string(luminav_version()),
            std::to_string(LUMINAV_VERSION_MAJOR) + "." + std::to_string(LUMINAV_VERSION_MINOR) + "." +
                std::to_string(LUMINAV_VERSION_PATCH));
}

}  // namespace
