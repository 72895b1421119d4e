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

TEST(CudaDriver, AFailedCaptureQueryCountsAsCapturingAndNoQueryAsNot) {
  // The fake's cuStreamIsCapturing fails, as the query does while another stream captures in
  // global mode: the caller must then take the capture-safe path.
  EXPECT_TRUE(CudaDriver::load(LUMINAV_FAKE_LIBCUDA).stream_capturing(nullptr));
  EXPECT_FALSE(CudaDriver::load("libcuda-absent-for-test.so.1").stream_capturing(nullptr));
}

TEST(CudaDriver, ADriverOlderThanRequiredIsNamedWithBothVersions) {
  // cuDriverGetVersion: 12000 is CUDA 12.0 (r525), 12010 is 12.1 (r530).
  EXPECT_EQ(driver_older_than(12000, 12010, "large parameters"),
            "the CUDA driver supports CUDA 12.0; large parameters needs CUDA 12.1 or later: update the NVIDIA driver");
  EXPECT_EQ(driver_older_than(11080, 12010, "x"),
            "the CUDA driver supports CUDA 11.8; x needs CUDA 12.1 or later: update the NVIDIA driver");
  EXPECT_EQ(driver_older_than(12010, 12010, "x"), "");
  EXPECT_EQ(driver_older_than(13000, 12010, "x"), "");
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
