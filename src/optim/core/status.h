// A status code (LUMINAV_STATUS_*) with its message, carried inside the library.
#pragma once

#include <string>
#include <utility>

#include "luminav/luminav.h"

namespace luminav::core {

struct Status {
  int code = LUMINAV_STATUS_OK;
  std::string message;

  bool ok() const { return code == LUMINAV_STATUS_OK; }
  static Status success() { return {}; }
  static Status error(int code, std::string message) { return {code, std::move(message)}; }
  static Status invalid(std::string message) {
    return {LUMINAV_STATUS_INVALID_ARGUMENT, std::move(message)};
  }
};

// Shortest text that reads back to the same double ("-0.1", "nan", "inf").
std::string format_number(double value);

}  // namespace luminav::core
