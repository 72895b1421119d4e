// Number formatting for error messages.
#include "optim/core/status.h"

#include <charconv>
#include <cmath>

namespace luminav::core {

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

}  // namespace luminav::core
