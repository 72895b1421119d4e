// The C boundary: no C++ exception escapes, every failure leaves a status and
// the calling thread's last error message.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "luminav/luminav.h"
#include "optim/core/status.h"

namespace luminav::capi {

void set_last_error(std::string message);

// Records a failed status's message; returns its code.
inline int report(const core::Status& status) {
  if (!status.ok()) set_last_error(status.message);
  return status.code;
}

// Runs `body` (returning core::Status) and maps exceptions to status codes:
// std::bad_alloc -> OUT_OF_MEMORY, anything else -> INTERNAL.
template <class Body>
int guarded(Body&& body) noexcept {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return LUMINAV_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    try {
      set_last_error(std::string("internal error: ") + e.what());
    } catch (...) {
    }
    return LUMINAV_STATUS_INTERNAL;
  } catch (...) {
    try {
      set_last_error("internal error: unknown exception");
    } catch (...) {
    }
    return LUMINAV_STATUS_INTERNAL;
  }
}

}  // namespace luminav::capi
