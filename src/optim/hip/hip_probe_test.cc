// Tests of the ROCm probe's fallback reasons (no AMD driver here).
#include "optim/hip/hip_driver.h"

#include <gtest/gtest.h>

namespace luminav::hip {
namespace {

TEST(HipProbe, TriesSevenThenSixAndKeepsBothReasons) {
  const char* const libraries[] = {"libamdhip64-absent.so.7", "libamdhip64-absent.so.6"};
  const HipProbe p = probe_hip(libraries, 2);
  EXPECT_FALSE(p.driver_loaded);
  const size_t seven = p.why_not.find("dlopen(libamdhip64-absent.so.7) failed");
  const size_t six = p.why_not.find("dlopen(libamdhip64-absent.so.6) failed");
  ASSERT_NE(seven, std::string::npos) << p.why_not;
  ASSERT_NE(six, std::string::npos) << p.why_not;
  EXPECT_LT(seven, six);
  EXPECT_EQ(p.why_not.rfind("no ROCm driver: ", 0), 0u);
}

TEST(HipProbe, LibraryWithoutHipEntryPointsIsRefused) {
  const char* const libraries[] = {"libc.so.6"};
  const HipProbe p = probe_hip(libraries, 1);
  EXPECT_FALSE(p.driver_loaded);
  EXPECT_NE(p.why_not.find("lacks the HIP entry points"), std::string::npos) << p.why_not;
}

TEST(HipProbe, ProcessProbeExplainsItself) {
  const HipProbe& p = hip_probe();
  if (p.why_not.empty()) {
    EXPECT_GT(p.device_count, 0);
  } else {
    EXPECT_FALSE(p.why_not.empty());
  }
}

}  // namespace
}  // namespace luminav::hip
