// The Arrow memory pool of the data engine's Parquet and Arrow IPC reading
// and writing.
#pragma once
#include <arrow/memory_pool.h>
#include <arrow/status.h>

#include <climits>
#include <cstdint>
#include <string>

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

// Note [bounded reading pool]: a damaged Parquet page header can claim any
// number of values, and Arrow's decoder sizes its buffer from the claim
// before it reads the values: a 2.3 KB file (fuzz/regressions/
// fuzz_parquet_reader/dictionary-claims-10-gb) asked for one 10 GB buffer
// for its dictionary. Reading never needs a single buffer above INT32_MAX
// bytes (a string array's offsets are 32-bit, so Arrow splits larger
// columns into chunks), so the reader's pool refuses such a request with
// Arrow's OutOfMemory status, which the reader reports as an undecodable row
// group, instead of letting the allocation take the machine's memory.
class BoundedReadPool final : public arrow::MemoryPool {
 public:
  static constexpr int64_t kMaxBuffer = INT32_MAX;

  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override {
    if (size > kMaxBuffer) return refuse(size);
    return base()->Allocate(size, alignment, out);
  }
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment, uint8_t** ptr) override {
    if (new_size > kMaxBuffer) return refuse(new_size);
    return base()->Reallocate(old_size, new_size, alignment, ptr);
  }
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override { base()->Free(buffer, size, alignment); }
  int64_t bytes_allocated() const override { return base()->bytes_allocated(); }
  int64_t max_memory() const override { return base()->max_memory(); }
  int64_t total_bytes_allocated() const override { return base()->total_bytes_allocated(); }
  int64_t num_allocations() const override { return base()->num_allocations(); }
  std::string backend_name() const override { return base()->backend_name(); }

 private:
  static arrow::MemoryPool* base() { return data_memory_pool(); }
  static arrow::Status refuse(int64_t size) {
    return arrow::Status::OutOfMemory("a buffer of ", size, " bytes (more than any readable column needs: the file is damaged)");
  }
};

// The pool of the data engine's Parquet reading (Note [bounded reading pool]).
inline arrow::MemoryPool* data_read_pool() {
  static BoundedReadPool pool;
  return &pool;
}

}  // namespace luminamoon
