// Highway target naming and the LUMINAV_SIMD_TARGET override.
#include "optim/simd/highway_target.h"

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "hwy/targets.h"
#include "optim/simd/step_kernels.h"

namespace luminav::simd {

std::string current_target_name() { return hwy::TargetName(dispatched_target()); }

std::string available_target_names() {
  std::string names;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (!names.empty()) names += ",";
    names += hwy::TargetName(target);
  }
  return names;
}

bool apply_target_override(std::string* why_not) {
  // Applied once: DisableTargets is process-wide Highway state.
  static const std::string error = []() -> std::string {
    const char* env = std::getenv("LUMINAV_SIMD_TARGET");
    if (env == nullptr || *env == '\0') return {};
    const std::string wanted(env);
    for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
      if (wanted == hwy::TargetName(target)) {
        // Highway numbers targets so that every better one has a lower bit.
        hwy::DisableTargets(target - 1);
        return {};
      }
    }
    return "LUMINAV_SIMD_TARGET=" + wanted + " is not a Highway target compiled in and " +
           "supported here (available: " + available_target_names() + ")";
  }();
  if (why_not) *why_not = error;
  return error.empty();
}

}  // namespace luminav::simd
