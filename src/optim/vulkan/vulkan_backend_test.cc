// The vulkan backend through the C API (on lavapipe unless VK_DRIVER_FILES
// names another driver): its devices and reason, a forced step against the
// scalar backend, and auto routing that never picks a CPU implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "luminav/luminav.h"

namespace {

// Before the library's first probe (the Vulkan context is made once).
const bool kPinned = [] {
  setenv("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json", 0);
  return true;
}();

int vulkan_index() {
  for (int i = 0; i < luminav_backend_count(); ++i) {
    if (std::string(luminav_backend_name(i)) == "vulkan") return i;
  }
  return -1;
}

struct Arrays {
  std::vector<float> p, g, m, v;
  explicit Arrays(size_t n) : p(n), g(n), m(n, 0.0f), v(n, 0.0f) {
    for (size_t i = 0; i < n; ++i) {
      p[i] = std::sin(0.1f * static_cast<float>(i));
      g[i] = 0.01f * std::cos(0.37f * static_cast<float>(i)) + 0.002f;
    }
  }
  luminav_tensor tensor() {
    luminav_tensor t{};
    t.param = p.data();
    t.grad = g.data();
    t.exp_avg = m.data();
    t.exp_avg_sq = v.data();
    t.num_elements = p.size();
    return t;
  }
};

TEST(VulkanBackend, ListsItsDevicesOrSaysWhyNot) {
  (void)kPinned;
  const int index = vulkan_index();
  ASSERT_GE(index, 0) << "the vulkan backend is compiled in";
  const std::string why = luminav_backend_unavailable_reason(index);
  const std::string devices = luminav_backend_devices(index);
  if (!luminav_backend_available(index)) {
    EXPECT_NE(why.find("Vulkan"), std::string::npos) << why;
    GTEST_SKIP() << why;
  }
  EXPECT_EQ(why, "");
  EXPECT_NE(devices.find("[selected]"), std::string::npos) << devices;
}

TEST(VulkanBackend, ForcedStepAgreesWithScalar) {
  if (!luminav_backend_available(vulkan_index())) GTEST_SKIP() << "vulkan unavailable";
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.step = 4;
  hp.cautious = 1;
  hp.tau = 0.5;
  Arrays a(5000), b(5000);
  luminav_tensor ta = a.tensor(), tb = b.tensor();
  luminav_options scalar{};
  scalar.backend = "scalar";
  luminav_options vulkan{};
  vulkan.backend = "vulkan";
  ASSERT_EQ(luminav_step(&hp, &ta, &scalar), LUMINAV_STATUS_OK);
  ASSERT_EQ(luminav_step(&hp, &tb, &vulkan), LUMINAV_STATUS_OK) << luminav_last_error_message();
  EXPECT_EQ(std::string(luminav_last_backend()).rfind("vulkan:", 0), 0u) << luminav_last_backend();
  for (size_t i = 0; i < a.p.size(); ++i) {
    ASSERT_NEAR(a.p[i], b.p[i], 1e-6f * (std::fabs(a.p[i]) + 1e-3f)) << i;
    ASSERT_NEAR(a.m[i], b.m[i], 1e-6f * std::fabs(a.m[i]) + 1e-12f) << i;
  }
}

TEST(VulkanBackend, AutoNeverRoutesToACpuImplementation) {
  const int index = vulkan_index();
  if (!luminav_backend_available(index)) GTEST_SKIP() << "vulkan unavailable";
  const std::string devices = luminav_backend_devices(index);
  Arrays a(20000);
  luminav_tensor t = a.tensor();
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  ASSERT_EQ(luminav_step(&hp, &t, nullptr), LUMINAV_STATUS_OK);
  const bool cpu_selected = devices.find("(CPU, ") != std::string::npos && devices.find("forced only") != std::string::npos;
  if (cpu_selected) EXPECT_NE(std::string(luminav_last_backend()).rfind("vulkan", 0), 0u) << luminav_last_backend();
}

}  // namespace
