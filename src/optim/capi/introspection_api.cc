// Backends, CPU features, threads and the last backend, as seen from C.
#include <string>
#include <vector>

#include "luminav/luminav.h"
#include "luminav/luminav_trace.h"
#include "optim/capi/error_boundary.h"
#include "optim/capi/export.h"
#include "optim/dispatch/cpu_features.h"
#include "optim/dispatch/host_trace.h"
#include "optim/dispatch/registry.h"
#include "optim/dispatch/step_driver.h"
#include "optim/dispatch/threads.h"

namespace dispatch = luminav::dispatch;

namespace {

bool valid_index(int index) {
  return index >= 0 && static_cast<size_t>(index) < dispatch::backend_count();
}

// Names and reasons live as long as the process (the registry never changes).
const std::vector<std::string>& unavailable_reasons() {
  static const std::vector<std::string> reasons = [] {
    std::vector<std::string> all;
    for (size_t i = 0; i < dispatch::backend_count(); ++i) {
      std::string why;
      dispatch::backend_available(i, &why);
      all.push_back(why);
    }
    return all;
  }();
  return reasons;
}

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (size_t i = 0; i < dispatch::backend_count(); ++i) {
      all.emplace_back(dispatch::backend_at(i).name());
    }
    return all;
  }();
  return names;
}

}  // namespace

LUMINAV_EXPORT int luminav_backend_count(void) {
  try {
    return static_cast<int>(dispatch::backend_count());
  } catch (...) {
    return 0;
  }
}

LUMINAV_EXPORT const char* luminav_backend_name(int index) {
  try {
    return valid_index(index) ? backend_names()[static_cast<size_t>(index)].c_str() : "";
  } catch (...) {
    return "";
  }
}

LUMINAV_EXPORT int luminav_backend_available(int index) {
  try {
    return valid_index(index) && dispatch::backend_available(static_cast<size_t>(index)) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

LUMINAV_EXPORT const char* luminav_backend_unavailable_reason(int index) {
  try {
    if (!valid_index(index)) return "no such backend";
    return unavailable_reasons()[static_cast<size_t>(index)].c_str();
  } catch (...) {
    return "";
  }
}

LUMINAV_EXPORT const char* luminav_backend_devices(int index) {
  try {
    static const std::vector<std::string> devices = [] {
      std::vector<std::string> all;
      for (size_t i = 0; i < dispatch::backend_count(); ++i) all.push_back(dispatch::backend_at(i).devices());
      return all;
    }();
    return valid_index(index) ? devices[static_cast<size_t>(index)].c_str() : "";
  } catch (...) {
    return "";
  }
}

LUMINAV_EXPORT const char* luminav_last_backend(void) { return dispatch::last_backend_label(); }

LUMINAV_EXPORT const char* luminav_cpu_features(void) {
  try {
    return dispatch::cpu_features().c_str();
  } catch (...) {
    return "";
  }
}

LUMINAV_EXPORT int luminav_set_num_threads(int num_threads) {
  if (num_threads < 0) {
    try {
      luminav::capi::set_last_error("num_threads must be >= 0 (got " +
                                    std::to_string(num_threads) + ")");
    } catch (...) {
    }
    return -LUMINAV_STATUS_INVALID_ARGUMENT;
  }
  return dispatch::set_num_threads(num_threads);
}

LUMINAV_EXPORT int luminav_get_num_threads(void) { return dispatch::num_threads(); }

LUMINAV_EXPORT size_t luminav_host_trace(const char** stages, double* microseconds, size_t capacity) {
  return dispatch::host_trace_stages(stages, microseconds, capacity);  // never throws
}
