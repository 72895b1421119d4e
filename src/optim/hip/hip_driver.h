// The ROCm HIP runtime, probed with dlopen (libamdhip64.so.7, then .6).
#pragma once

#include <string>

namespace luminav::hip {

// Note [ROCm probe]: the probe opens the HIP runtime (or the library named by
// LUMINAV_HIP_DRIVER, for tests), resolves the few entry points it needs and
// counts devices. Every failure leaves the reasons of every library tried.
struct HipProbe {
  bool driver_loaded = false;
  std::string library;     // the library that loaded
  int runtime_version = 0;
  int device_count = 0;
  std::string device_name;  // device 0
  std::string why_not;      // "" when a device is usable
};

// Probed once per process.
const HipProbe& hip_probe();
// A fresh probe of `libraries` (tests).
HipProbe probe_hip(const char* const* libraries, int count);

}  // namespace luminav::hip
