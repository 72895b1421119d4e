// dlopen probe of the HIP runtime: load, resolve, init, count devices.
#include "optim/hip/hip_driver.h"

#include <dlfcn.h>

#include <cstdlib>

namespace luminav::hip {
namespace {

// HIP's C ABI: hipError_t is an int-sized enum, hipDevice_t an int.
using HipError = int;
using HipInit = HipError (*)(unsigned);
using HipGetDeviceCount = HipError (*)(int*);
using HipRuntimeGetVersion = HipError (*)(int*);
using HipDeviceGetName = HipError (*)(char*, int, int);
using HipGetErrorName = const char* (*)(HipError);
using HipGetErrorString = const char* (*)(HipError);

std::string hip_error(void* handle, const char* operation, HipError e) {
  auto name = reinterpret_cast<HipGetErrorName>(dlsym(handle, "hipGetErrorName"));
  auto text = reinterpret_cast<HipGetErrorString>(dlsym(handle, "hipGetErrorString"));
  const char* n = name ? name(e) : nullptr;
  const char* t = text ? text(e) : nullptr;
  return std::string("[") + operation + "][" + (n ? n : "hipError " + std::to_string(e)) + "] " +
         (t ? t : "unknown HIP error");
}

}  // namespace

HipProbe probe_hip(const char* const* libraries, int count) {
  HipProbe p;
  void* handle = nullptr;
  std::string tried;
  for (int i = 0; i < count && handle == nullptr; ++i) {
    handle = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      p.library = libraries[i];
    } else {
      const char* err = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string("dlopen(") + libraries[i] + ") failed: " +
               (err ? err : "unknown error");
    }
  }
  if (handle == nullptr) {
    p.why_not = "no ROCm driver: " + tried;
    return p;
  }
  auto init = reinterpret_cast<HipInit>(dlsym(handle, "hipInit"));
  auto device_count = reinterpret_cast<HipGetDeviceCount>(dlsym(handle, "hipGetDeviceCount"));
  auto version = reinterpret_cast<HipRuntimeGetVersion>(dlsym(handle, "hipRuntimeGetVersion"));
  auto device_name = reinterpret_cast<HipDeviceGetName>(dlsym(handle, "hipDeviceGetName"));
  if (!init || !device_count || !version || !device_name) {
    p.why_not = "no ROCm driver: " + p.library + " lacks the HIP entry points (hipInit, hipGetDeviceCount, ...)";
    return p;  // the handle stays open: closing runtimes is unsafe and it is small
  }
  p.driver_loaded = true;
  if (HipError e = init(0); e != 0) {
    p.why_not = "ROCm driver present but unusable: " + hip_error(handle, "hipInit", e);
    return p;
  }
  version(&p.runtime_version);
  if (HipError e = device_count(&p.device_count); e != 0 || p.device_count <= 0) {
    p.why_not = "ROCm driver present but it reports no device" +
                (e != 0 ? ": " + hip_error(handle, "hipGetDeviceCount", e) : std::string());
    return p;
  }
  char name[256] = {};
  if (device_name(name, sizeof name - 1, 0) == 0) p.device_name = name;
  return p;
}

const HipProbe& hip_probe() {
  static const HipProbe probe = [] {
    const char* override_path = std::getenv("LUMINAV_HIP_DRIVER");
    if (override_path != nullptr && *override_path) return probe_hip(&override_path, 1);
    static const char* const kLibraries[] = {"libamdhip64.so.7", "libamdhip64.so.6"};
    return probe_hip(kLibraries, 2);
  }();
  return probe;
}

}  // namespace luminav::hip
