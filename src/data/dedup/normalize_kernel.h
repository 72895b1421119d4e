// Byte classes of a 64-byte block for the dedup normalization (internal):
// Highway, every target, runtime dispatch.
#pragma once

#include <cstdint>

namespace luminamoon {

// For the 64 bytes at p: lowered[i] = p[i] with ASCII A-Z lower-cased; bit i
// of *separator is set when p[i] is an ASCII separator of Note [dedup
// normalization], bit i of *lead when p[i] is 0xC2, 0xE2 or 0xE3 (the lead
// bytes of the multi-byte separators, which the caller checks).
void classify_block(const uint8_t* p, uint8_t* lowered, uint64_t* separator, uint64_t* lead);

}  // namespace luminamoon
