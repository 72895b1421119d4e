// Tests of the driver loader's fallback reasons and error format (no GPU needed).
#include "optim/cuda/cuda_driver.h"

#include <gtest/gtest.h>

namespace luminav::cuda {
namespace {

TEST(CudaDriver, MissingLibraryFallsBackWithTheDlopenReason) {
  const CudaDriver d = CudaDriver::load("libcuda-absent-for-test.so.1");
  EXPECT_FALSE(d.usable());
  EXPECT_NE(d.why_not().find("no CUDA driver: dlopen(libcuda-absent-for-test.so.1) failed"),
            std::string::npos)
      << d.why_not();
  DeviceInfo info;
  std::string why;
  EXPECT_FALSE(d.device_info(0, &info, &why));
  EXPECT_EQ(why, d.why_not());
}

TEST(CudaDriver, LibraryThatIsNotADriverIsRefusedByEntryPoint) {
  const CudaDriver d = CudaDriver::load("libc.so.6");
  EXPECT_FALSE(d.usable());
  EXPECT_NE(d.why_not().find("libc.so.6 lacks the entry point cuInit"), std::string::npos) << d.why_not();
}

TEST(CudaDriver, DriverWithoutDeviceGivesTheFormattedDriverError) {
  const CudaDriver d = CudaDriver::load(LUMINAV_FAKE_LIBCUDA);
  EXPECT_FALSE(d.usable());
  EXPECT_EQ(d.why_not(),
            "CUDA driver present but unusable: [cuInit][CUDA_ERROR_NO_DEVICE] no CUDA-capable device is detected");
  EXPECT_EQ(d.error("cuMemAlloc", 3), "[cuMemAlloc][CUDA_ERROR_NOT_INITIALIZED] initialization error");
  // A code the driver cannot name still gives the format.
  EXPECT_EQ(d.error("cuLaunchKernel", 999), "[cuLaunchKernel][CUDA_ERROR_999] unknown driver error");
}

TEST(CudaDriver, ProcessDriverAnswersEitherWay) {
  // On a machine without a GPU driver (CI) the reason is non-empty; with one
  // it is usable and has devices. Either way it must not crash.
  const CudaDriver& d = CudaDriver::instance();
  if (d.usable()) {
    EXPECT_GT(d.device_count(), 0);
    EXPECT_TRUE(d.why_not().empty());
  } else {
    EXPECT_FALSE(d.why_not().empty());
  }
}

}  // namespace
}  // namespace luminav::cuda
