// Byte classes of a 64-byte block for the dedup normalization (internal):
// Highway, every target, runtime dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminamoon {

// For the blocks * 64 bytes at p, block b: lowered[64b + i] = p[64b + i] with
// ASCII A-Z lower-cased; bit i of separator[b] is set when that byte is an
// ASCII separator of Note [dedup normalization], bit i of lead[b] when it is
// 0xC2, 0xE2 or 0xE3 (the lead bytes of the multi-byte separators, which the
// caller checks). One dispatch for all the blocks of a text.
void classify_blocks(const uint8_t* p, size_t blocks, uint8_t* lowered, uint64_t* separator, uint64_t* lead);

}  // namespace luminamoon
