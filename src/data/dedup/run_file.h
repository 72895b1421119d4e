// RunFile: sorted runs of 16-byte entries (a 64-bit key, then 64 bits of
// value) in one unnamed scratch file; each run's Bloom filter and page fences
// stay in memory (Note [sorted runs on disk]).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/common/blocked_bloom.h"

namespace luminamoon {

// Note [sorted runs on disk]
// The dedup indexes keep their older keys out of memory the same way (the
// exact-dedup keys: Note [exact-dedup keys on disk]; the LSH band keys: Note
// [band runs on disk]). A run is a batch of entries sorted by (key, value),
// written in 4 KB pages to an unnamed scratch file; in memory it leaves a
// blocked Bloom filter of its keys (~1.25 bytes a key) and the first key of
// each page. A lookup asks the filter and reads (pread, mostly from the page
// cache) the pages that can hold the key: one, or more where many entries
// share a key. Runs of one tier merge (streamed, a page of each input and a
// 64 KB output buffer at a time) into one of the next, so that a lookup asks
// logarithmically many runs; the merged runs' bytes go back to the file
// system as a punched hole where it allows. Writes go to the file's own end
// offset (pwrite), so a write that fails part way leaves no run and the next
// write lands over its bytes. Where no scratch file can be made the entries
// stay in memory (on_disk() false: callers may prefer to keep their own
// tables then) and are never merged.
struct RunEntry {
  uint64_t key;
  uint64_t value;
};

struct SortedRun {
  uint64_t offset = 0;  // entries before its first one (in the file or in memory)
  uint64_t count = 0;
  int tier = 0;
  std::vector<uint64_t> fences;  // the first key of each page
  BlockedBloom bloom;
};

class RunFile {
 public:
  static constexpr size_t kPageEntries = 4096 / sizeof(RunEntry);
  static constexpr size_t kMergeFanIn = 4;

  // A scratch file in dir ("" for TMPDIR or /tmp; TMPDIR where dir refuses
  // one); in memory where neither can hold one. label names it in errors.
  RunFile(const std::string& dir, const std::string& label);
  ~RunFile();
  RunFile(const RunFile&) = delete;
  RunFile& operator=(const RunFile&) = delete;
  bool on_disk() const { return fd_ >= 0; }

  // A run of `sorted` (ordered by key, then value). Throws DataError on a
  // failed write; the runs already written are unaffected.
  SortedRun write(std::span<const RunEntry> sorted, int tier);
  // One run of tier `tier` holding every entry of `inputs`, in order; the
  // inputs are not released (release() them once the result is kept).
  SortedRun merge(std::span<const SortedRun* const> inputs, int tier);
  // Gives a run's bytes back to the file system (a merged input).
  void release(const SortedRun& run);

  // Calls f(entry) for every entry of `run` whose key is `key`.
  template <class F>
  void find(const SortedRun& run, uint64_t key, F&& f) const {
    if (run.count == 0 || !run.bloom.may_contain(key)) return;
    RunEntry page[kPageEntries];
    // Entries equal to the key may begin on the page before the first fence >= key.
    size_t p = static_cast<size_t>(std::lower_bound(run.fences.begin(), run.fences.end(), key) - run.fences.begin());
    if (p > 0) --p;
    for (; p < run.fences.size() && run.fences[p] <= key; ++p) {
      const uint64_t first = static_cast<uint64_t>(p) * kPageEntries;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPageEntries, run.count - first));
      read(run, first, n, page);
      for (size_t i = 0; i < n; ++i) {
        if (page[i].key == key) f(page[i]);
      }
      if (page[n - 1].key > key) break;
    }
  }
  // Calls f(entry) for every entry of `run`, in order.
  template <class F>
  void for_each(const SortedRun& run, F&& f) const {
    std::vector<RunEntry> page(kPageEntries);
    for (uint64_t first = 0; first < run.count; first += kPageEntries) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPageEntries, run.count - first));
      read(run, first, n, page.data());
      for (size_t i = 0; i < n; ++i) f(page[i]);
    }
  }
  void read(const SortedRun& run, uint64_t first, size_t n, RunEntry* out) const;

  // The memory of one run: its filter and fences.
  static uint64_t memory_bytes(const SortedRun& run) {
    return run.fences.capacity() * sizeof(uint64_t) + run.bloom.memory_bytes();
  }
  // Entries held in memory where there is no file.
  uint64_t memory_bytes() const { return memory_.capacity() * sizeof(RunEntry); }

 private:
  // Appends entries to the file (or memory); returns the entry they start at.
  uint64_t append(const RunEntry* entries, size_t n);

  int fd_ = -1;
  std::string what_;
  uint64_t end_ = 0;  // entries written to the file
  std::vector<RunEntry> memory_;
};

// Tiers of runs: true when the newest kMergeFanIn runs share a tier (and
// should merge). tier_of(i) gives run i's tier; tiers never increase from
// the oldest run to the newest.
template <class TierOf>
bool newest_runs_share_a_tier(size_t runs, TierOf&& tier_of) {
  return runs >= RunFile::kMergeFanIn && tier_of(runs - RunFile::kMergeFanIn) == tier_of(runs - 1);
}

}  // namespace luminamoon
