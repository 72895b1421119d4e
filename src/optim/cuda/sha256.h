// SHA-256 of a byte range as lowercase hex (OpenSSL's libcrypto does the work).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace luminav::cuda {

// 64 lowercase hex digits; "" if the digest could not be computed.
std::string sha256_hex(std::span<const uint8_t> bytes);

}  // namespace luminav::cuda
