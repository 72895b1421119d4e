// The CUDA driver, loaded with dlopen at run time (no link to libcuda).
#pragma once

#include <string>
#include <string_view>

#include "optim/cuda/driver_api.h"

namespace luminav::cuda {

// One device's facts, read through the driver.
struct DeviceInfo {
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  std::string name;
  // "sm_90" for compute capability 9.0.
  std::string arch() const;
};

// Note [driver loading]: the driver library is opened once per process
// ("libcuda.so.1", or the path in LUMINAV_CUDA_DRIVER, which tests use to
// point at a library that is not a CUDA driver). Every step that can fail
// leaves a one-line reason; nothing here aborts or throws.
class CudaDriver {
 public:
  // The process-wide driver (loaded on first use, thread-safe).
  static const CudaDriver& instance();
  // A driver loaded from `library` (tests; production uses instance()).
  static CudaDriver load(const char* library);

  CudaDriver(CudaDriver&&) noexcept;
  CudaDriver& operator=(CudaDriver&&) = delete;
  ~CudaDriver();

  bool usable() const { return usable_; }
  // Why the driver cannot be used ("" when it can).
  const std::string& why_not() const { return why_not_; }
  const drv::Api& api() const { return api_; }
  int driver_version() const { return driver_version_; }
  int device_count() const { return device_count_; }

  // `[operation][CUDA_ERROR_NAME] description` (ARCHITECTURE.md, convention 5).
  std::string error(std::string_view operation, drv::CUresult result) const;
  // Whether `stream` is being captured in a CUDA graph. A failed query (an illegal one while
  // another stream captures) counts as capturing; a driver without cuStreamIsCapturing captures
  // nothing.
  bool stream_capturing(drv::CUstream stream) const;
  // Facts of device `ordinal`; false with `why` set on failure.
  bool device_info(int ordinal, DeviceInfo* info, std::string* why) const;

 private:
  CudaDriver() = default;
  void* handle_ = nullptr;
  drv::Api api_{};
  bool usable_ = false;
  std::string why_not_;
  int driver_version_ = 0;
  int device_count_ = 0;
};

// "" when a driver of `version` (cuDriverGetVersion's 1000 * major + 10 *
// minor) is at least `required`; otherwise a one-line reason that names both
// versions and `needed_for`, what the newer driver is required for.
std::string driver_older_than(int version, int required, std::string_view needed_for);

}  // namespace luminav::cuda
