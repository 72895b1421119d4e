#include "data/pipeline/freed_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <climits>

namespace luminamoon {

// Note [freed memory kept]: a shard task allocates about twice its shard
// (the text read, the batches it keeps for its finish) and frees it at the
// end. glibc hands back to the kernel every block above its mmap threshold
// (at most 32 MiB, adjusted as blocks are freed) and the free top of the heap
// above its trim threshold, so the next task of the same worker faults all of
// that memory in again: ~28,000 page faults per 50 MB shard of real text, the
// kernel zeroing each page. On the 2-core VM of docs/benchmarks.md, where a
// page the host has taken back costs ~10-20 us, that was 0.05-0.45 s of system
// time on a 0.25 s map; with both thresholds raised the faults drop to ~0 and
// a map to 0.23 s (issue 17, session 17). Peak memory does not grow: what is
// kept is what the process already held at its peak, reused by the next task.
bool keep_freed_memory(size_t bytes) {
#if defined(__GLIBC__)
  const int clamped = static_cast<int>(std::min<size_t>(bytes, INT_MAX));
  // M_MMAP_THRESHOLD fixed (no longer adjusted by glibc) before M_TRIM_THRESHOLD.
  return ::mallopt(M_MMAP_THRESHOLD, clamped) == 1 && ::mallopt(M_TRIM_THRESHOLD, clamped) == 1;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace luminamoon
