// The standalone engine's routing on a machine without a usable CUDA driver:
// host pointers run on the CPU, and the engine reports the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "luminav/luminav.h"
#include "luminav_triton_standalone.h"

// LUMINAV_TEST_CUDA_DRIVER: the library this process loads as the CUDA
// driver (a missing file, or the fake libcuda whose cuInit finds no device);
// LUMINAV_TEST_DRIVER_REASON: what the cuda backend's reason must contain.
// LUMINAV_TEST_SUITE names the suite (one binary per driver situation).
#if !defined(LUMINAV_TEST_CUDA_DRIVER) || !defined(LUMINAV_TEST_DRIVER_REASON) || !defined(LUMINAV_TEST_SUITE)
#error "define LUMINAV_TEST_CUDA_DRIVER, LUMINAV_TEST_DRIVER_REASON and LUMINAV_TEST_SUITE"
#endif

namespace {

// The driver is loaded once per process, so the environment is set before
// any test (and so before the first engine) runs.
class NoDriverEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("LUMINAV_CUDA_DRIVER", LUMINAV_TEST_CUDA_DRIVER, 1);
    unsetenv("LUMINAV_FORCE_BACKEND");
  }
};
[[maybe_unused]] const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new NoDriverEnvironment);

struct Engine {
  LuminaVTritonEngine* e = luminav_triton_engine_create();
  ~Engine() { luminav_triton_engine_destroy(e); }
};

std::string cuda_reason() {
  for (int i = 0; i < luminav_backend_count(); ++i) {
    if (std::strcmp(luminav_backend_name(i), "cuda") == 0) {
      EXPECT_EQ(luminav_backend_available(i), 0);
      return luminav_backend_unavailable_reason(i);
    }
  }
  return "not compiled in";
}

TEST(LUMINAV_TEST_SUITE, WithoutADriverTheEngineReportsTheCpu) {
  Engine engine;
  ASSERT_NE(engine.e, nullptr) << luminav_last_error_message();
  EXPECT_STREQ(luminav_triton_get_platform(engine.e), "cpu");
  const std::string arch = luminav_triton_get_arch(engine.e);
  EXPECT_TRUE(arch.rfind("x86_64", 0) == 0 || arch.rfind("aarch64", 0) == 0) << arch;
  // The engine fell back for the reason this process set up.
  const std::string reason = cuda_reason();
  if (reason != "not compiled in") {
    EXPECT_NE(reason.find(LUMINAV_TEST_DRIVER_REASON), std::string::npos) << reason;
  }
}

// One AdamW step (CLM, no clip/lambda/mask/bound) on host memory against a
// float64 AdamW written here: the step ran, on the CPU, and is right.
TEST(LUMINAV_TEST_SUITE, HostPointersRunOnTheCpuBackend) {
  Engine engine;
  ASSERT_NE(engine.e, nullptr) << luminav_last_error_message();
  constexpr size_t n = 70000;  // two reduction tiles
  std::vector<float> x(n), g(n), m(n, 0.0f), v(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.37 * static_cast<double>(i)) * 0.5f;
    g[i] = std::cos(0.11 * static_cast<double>(i)) * 0.01f;
  }
  const std::vector<float> x0 = x;
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  ASSERT_EQ(luminav_triton_step_f32(engine.e, x.data(), g.data(), m.data(), v.data(), nullptr, nullptr, n,
                                    lr, b1, b2, eps, wd, 0.0f, 0.0f, /*buffer_mode=*/2, 0, 0, 0.0f,
                                    /*step=*/1, /*seed=*/0),
            LUMINAV_STATUS_OK)
      << luminav_last_error_message();
  const std::string used = luminav_last_backend();
  EXPECT_TRUE(used.rfind("simd", 0) == 0 || used.rfind("scalar", 0) == 0) << used;
  double max_err = 0, max_x = 0;
  for (size_t i = 0; i < n; ++i) {
    const double gi = g[i], bc1 = 1.0 - double(b1), bc2 = 1.0 - double(b2);
    const double mi = (1.0 - double(b1)) * gi, vi = (1.0 - double(b2)) * gi * gi;
    const double xi = double(x0[i]) * (1.0 - double(lr) * double(wd)) -
                      double(lr) * (mi / bc1) / (std::sqrt(vi / bc2) + double(eps));
    max_err = std::max(max_err, std::abs(double(x[i]) - xi));
    max_x = std::max(max_x, std::abs(xi));
    ASSERT_NEAR(m[i], mi, 1e-6 * std::abs(mi) + 1e-12) << i;
  }
  EXPECT_LE(max_err / max_x, 1e-6);
}

// Without a driver nothing can be device memory: a step whose buffers are all
// host memory is never refused as "mixed".
TEST(LUMINAV_TEST_SUITE, ScratchOnTheHostIsAcceptedWithoutADriver) {
  Engine engine;
  ASSERT_NE(engine.e, nullptr);
  constexpr size_t n = 1000;
  std::vector<float> x(n, 0.5f), g(n, 0.01f), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> scratch(luminav_scratch_bytes(n) / sizeof(double) + 1);
  EXPECT_EQ(luminav_triton_step_f32(engine.e, x.data(), g.data(), m.data(), v.data(), nullptr,
                                    reinterpret_cast<float*>(scratch.data()), n, 1e-3f, 0.9f, 0.999f,
                                    1e-8f, 0.0f, 0.0f, 0.0f, 2, 0, 0, 0.0f, 1, 0),
            LUMINAV_STATUS_OK)
      << luminav_last_error_message();
  EXPECT_LT(x[0], 0.5f);
}

}  // namespace
