// The order in which the signature path hashes a document's shingles:
// grouped by byte length where the CPU compresses vectors natively (Note
// [shingles grouped by length] in shingle_groups.cc); Highway dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminamoon {

// Entries `order` and `scratch` must hold past `count`: whole vectors are stored.
inline constexpr size_t kShingleOrderSlack = 64;

// Shingle i (i < count) spans word starts starts[i] .. starts[i + n] - 1 of
// a NormalizedWords text, so it is starts[i + n] - starts[i] - 1 bytes long.
// On AVX-512 targets: writes a permutation of 0 .. count - 1 into order, the
// shingles of at most 32 bytes first, then the longer ones (each group in
// increasing order), and returns true. Elsewhere returns false and writes
// nothing: hash in document order. Both arrays have room for count +
// kShingleOrderSlack entries.
bool order_shingles_for_hashing(const uint32_t* starts, size_t count, size_t n, uint32_t* order,
                                uint32_t* scratch);

}  // namespace luminamoon
