// The Arrow memory pool of the data engine's Parquet and Arrow IPC reading
// and writing.
#pragma once
#include <arrow/memory_pool.h>

namespace luminamoon {

// Note [Arrow memory pool]: Arrow's default pool (mimalloc in pyarrow's
// libarrow) returns freed pages to the system soon after a free, and a new
// thread's first allocation sets up an arena whose metadata lands on a fresh
// 2 MB huge page. A part's Parquet writer allocates and frees its page,
// encode and compress buffers again and again, so each new buffer was memory
// the kernel had to zero: in perf of the CLI on the real-text corpus (issue
// 15, session 11) page zeroing was 30% of all samples, more than half of them
// under Arrow's pool. glibc's allocator keeps freed memory for the next
// buffer: with arrow::system_memory_pool() the same CLI run took 0.073 s of
// system time instead of 0.141 (user time unchanged), 1.15x the MB per
// CPU-second, and 99 MB peak RSS instead of 113 (medians of 15 alternating
// runs; docs/benchmarks.md, row P2b).
inline arrow::MemoryPool* data_memory_pool() { return arrow::system_memory_pool(); }

}  // namespace luminamoon
