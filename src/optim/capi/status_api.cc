// Status names and the thread-local last error message.
#include <string>

#include "luminav/luminav.h"
#include "optim/capi/error_boundary.h"
#include "optim/capi/export.h"

namespace luminav::capi {

thread_local std::string last_error;

void set_last_error(std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {
    last_error.clear();
  }
}

}  // namespace luminav::capi

LUMINAV_EXPORT const char* luminav_status_name(int status) {
  switch (status) {
    case LUMINAV_STATUS_OK: return "OK";
    case LUMINAV_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case LUMINAV_STATUS_NONFINITE_GRAD: return "NONFINITE_GRAD";
    case LUMINAV_STATUS_BACKEND_UNAVAILABLE: return "BACKEND_UNAVAILABLE";
    case LUMINAV_STATUS_DRIVER_ERROR: return "DRIVER_ERROR";
    case LUMINAV_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case LUMINAV_STATUS_INTERNAL: return "INTERNAL";
    default: return "UNKNOWN_STATUS";
  }
}

LUMINAV_EXPORT const char* luminav_last_error_message(void) {
  return luminav::capi::last_error.c_str();
}
