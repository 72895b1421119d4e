// A process's allocator told to keep what it frees (Note [freed memory kept]).
#pragma once

#include <cstddef>

namespace luminamoon {

// Blocks up to `bytes` come from the heap and up to `bytes` of free heap stay
// with the process instead of going back to the kernel. Process-wide, for
// processes that run shard tasks one after another (Ray workers); false where
// the allocator has no such settings (not glibc) or refuses them.
bool keep_freed_memory(size_t bytes);

}  // namespace luminamoon
