// How a backend reports the message of a failed entry point to the C API.
#pragma once

#include <string>

namespace luminav {

// Sets the calling thread's pending backend message; the dispatcher turns a
// non-zero status plus this message into luminav_last_error_message(). Driver
// errors read "[operation][DRIVER_ERROR_NAME] description".
void set_backend_error(std::string message);
// Returns and clears it.
std::string take_backend_error();

}  // namespace luminav
