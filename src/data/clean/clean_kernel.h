// The cleaner's per-document kernel on valid UTF-8 (Highway, runtime dispatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace luminamoon::detail {

// Appends the cleaned form of valid UTF-8 bytes [s, s + n) to out (steps 2-5
// of TextCleaner); returns the number of bytes appended.
size_t clean_valid_utf8(const uint8_t* s, size_t n, std::string& out);
// Index of the first byte < 0x20 or == 0x7F, or n.
size_t find_control_byte(const uint8_t* s, size_t n);

}  // namespace luminamoon::detail
