// The thread-local message slot of set_backend_error / take_backend_error.
#include "optim/dispatch/backend_error.h"

#include <utility>

namespace luminav {
namespace {
thread_local std::string pending_backend_error;
}

void set_backend_error(std::string message) { pending_backend_error = std::move(message); }

std::string take_backend_error() {
  std::string message = std::move(pending_backend_error);
  pending_backend_error.clear();
  return message;
}

}  // namespace luminav
