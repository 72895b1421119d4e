// Parallel map over the documents of a batch into a new flat batch (oneTBB),
// in chunks of documents so that 10^6 tiny documents cost no per-document task.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/data_threads.h"
#include "luminamoon/text_batch.h"

namespace luminamoon::detail {

// The lowest document index offered from any thread (for "first bad
// document" errors that do not depend on scheduling).
class LowestIndex {
 public:
  void offer(size_t i) {
    size_t cur = value_.load();
    while (i < cur && !value_.compare_exchange_weak(cur, i)) {
    }
  }
  bool any() const { return value_.load() != SIZE_MAX; }
  size_t get() const { return value_.load(); }

 private:
  std::atomic<size_t> value_{SIZE_MAX};
};

// Note [stages in the pipeline's arena]: a batch stage called on its own
// (the Python batch API) runs its loops in an arena of data_num_threads()
// threads. Called by a pipeline, it ran them in such a nested arena too, so
// that FusedPipeline(num_threads=1) kept the machine's every core busy in the
// cleaner, quality and PII stages (1.16 cores on 2) and a Ray task of one CPU
// did not: the pipeline's stages now run their loops in the pipeline's own
// arena, of the pipeline's num_threads (StagesInCallersArena around each
// stage call of the pipeline's filters).
inline thread_local bool t_stages_in_callers_arena = false;

class StagesInCallersArena {
 public:
  StagesInCallersArena() : previous_(t_stages_in_callers_arena) { t_stages_in_callers_arena = true; }
  ~StagesInCallersArena() { t_stages_in_callers_arena = previous_; }
  StagesInCallersArena(const StagesInCallersArena&) = delete;
  StagesInCallersArena& operator=(const StagesInCallersArena&) = delete;

 private:
  bool previous_;
};

// Note [a stage's loops run to completion]: an algorithm started inside a
// task belongs to that task's cancellation group, so a stage's parallel loop
// inside the pipeline was cancelled with the pipeline: when another filter
// threw (a malformed record in strict mode, a missing shard), the loop
// skipped its chunks not yet started and returned as if done, and the stage
// read results that were never computed (the quality stage looked up check
// -1 and crashed: issue 17's Ray tests, about one run in four). A stage's loops now
// run in a task group of their own (an isolated context): a loop always
// covers its whole batch, and the pipeline's cancellation takes effect
// between stages, where TBB starts no further filters.
template <class Body>
void run_to_completion(const Body& body) {
  tbb::task_group_context own(tbb::task_group_context::isolated);
  tbb::task_group group(own);
  group.run_and_wait(body);  // rethrows body's exception
}

// Runs body() in an arena of data_num_threads() threads, or in the caller's
// (Note [stages in the pipeline's arena]), to completion either way.
template <class Body>
void run_in_arena(const Body& body) {
  if (t_stages_in_callers_arena) {
    run_to_completion(body);
    return;
  }
  tbb::task_arena arena(data_num_threads());
  arena.execute([&] { run_to_completion(body); });
}

// Splits [0, n) documents into chunks of about `target_bytes` input bytes.
inline std::vector<size_t> chunk_bounds(const TextBatchView& batch, size_t target_bytes = 1 << 18) {
  std::vector<size_t> bounds{0};
  size_t start_byte = batch.size ? static_cast<size_t>(batch.offsets[0]) : 0;
  for (size_t i = 0; i < batch.size; ++i) {
    const size_t end_byte = static_cast<size_t>(batch.offsets[i + 1]);
    if (end_byte - start_byte >= target_bytes || i + 1 - bounds.back() >= 65536) {
      bounds.push_back(i + 1);
      start_byte = end_byte;
    }
  }
  if (bounds.back() != batch.size) bounds.push_back(batch.size);
  return bounds;
}

// Note [warm output memory]: a chunk's output goes into a string taken from
// the running thread's spare list and given back (capacity kept) once copied,
// so that repeated calls do not map, fault in and zero fresh pages for every
// chunk. A thread keeps at most kSpareBytesPerThread of spares (about one
// batch output of the benchmark's 100 MB corpus on one thread).
inline constexpr size_t kSpareBytesPerThread = size_t(128) << 20;

struct SpareStrings {
  std::vector<std::string> list;
  size_t bytes = 0;
};
inline SpareStrings& spare_strings() {
  thread_local SpareStrings spares;
  return spares;
}
inline std::string take_spare_string() {
  SpareStrings& sp = spare_strings();
  if (sp.list.empty()) return {};
  std::string s = std::move(sp.list.back());
  sp.list.pop_back();
  sp.bytes -= s.capacity();
  s.clear();
  return s;
}
inline void give_back_string(std::string&& s) {
  SpareStrings& sp = spare_strings();
  if (s.capacity() < 4096 || sp.bytes + s.capacity() > kSpareBytesPerThread) {
    std::string().swap(s);
    return;
  }
  sp.bytes += s.capacity();
  sp.list.push_back(std::move(s));
}

// Asks the kernel for transparent huge pages under a fresh large output
// buffer (Linux, THP in "madvise" mode): its first touch then costs one
// fault per 2 MiB instead of one per 4 KiB. Only a hint: no effect elsewhere.
inline void advise_huge_pages(void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (bytes < 4 * kHuge) return;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

// fn(size_t doc, std::string_view in, std::string& out) appends document
// doc's output to out. Returns the outputs as one flat batch.
template <class Fn>
TextBatch transform_documents(const TextBatchView& batch, Fn&& fn) {
  const std::vector<size_t> bounds = chunk_bounds(batch);
  const size_t chunks = bounds.size() - 1;
  std::vector<std::string> chunk_out(chunks);
  TextBatch result;
  result.offsets.assign(batch.size + 1, 0);
  run_in_arena([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t c = r.begin(); c != r.end(); ++c) {
        std::string& out = chunk_out[c];
        out = take_spare_string();  // Note [warm output memory]
        const size_t first = bounds[c], last = bounds[c + 1];
        out.reserve(static_cast<size_t>(batch.offsets[last] - batch.offsets[first]));
        for (size_t i = first; i < last; ++i) {
          fn(i, batch[i], out);
          result.offsets[i + 1] = static_cast<int64_t>(out.size());  // chunk-relative for now
        }
      }
    });
    // The result is sized without a zero-fill (ByteBuffer) and filled by
    // chunk in parallel, so that first touches and copies spread over threads.
    std::vector<int64_t> chunk_base(chunks + 1, 0);
    for (size_t c = 0; c < chunks; ++c) chunk_base[c + 1] = chunk_base[c] + static_cast<int64_t>(chunk_out[c].size());
    result.data.resize(static_cast<size_t>(chunk_base[chunks]));
    advise_huge_pages(result.data.data(), result.data.size());
    tbb::parallel_for(tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t c = r.begin(); c != r.end(); ++c) {
        if (!chunk_out[c].empty())
          std::memcpy(result.data.data() + chunk_base[c], chunk_out[c].data(), chunk_out[c].size());
        for (size_t i = bounds[c]; i < bounds[c + 1]; ++i) result.offsets[i + 1] += chunk_base[c];
        give_back_string(std::move(chunk_out[c]));
      }
    });
  });
  return result;
}

// fn(size_t doc, std::string_view in) for every document, in parallel chunks.
template <class Fn>
void for_each_document(const TextBatchView& batch, Fn&& fn) {
  const std::vector<size_t> bounds = chunk_bounds(batch, 1 << 16);
  run_in_arena([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, bounds.size() - 1, 1), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t c = r.begin(); c != r.end(); ++c)
        for (size_t i = bounds[c]; i < bounds[c + 1]; ++i) fn(i, batch[i]);
    });
  });
}

}  // namespace luminamoon::detail
