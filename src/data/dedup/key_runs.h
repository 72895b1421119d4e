// KeyRuns: distinct 64-bit keys, each with a 64-bit ref, as tiered sorted
// runs of a RunFile (Note [exact-dedup keys on disk]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dedup/run_file.h"

namespace luminamoon {

// Note [exact-dedup keys on disk]
// The exact-dedup set kept every distinct document's key and first ref in
// memory, 20-30 bytes a document at the hash table's load: ~10-15 MB of the
// CLI's 2 GB peak (issue 15, sessions 12-13), 6 GB at 300 million documents.
// With StreamDeduplicatorOptions::memory_keys, the set in memory holds at
// most that many keys; when it is full its (key, ref) pairs become one run
// here (Note [sorted runs on disk]: ~1.3 bytes a key left in memory). A new
// key asks every run's filter, a duplicate reads one page. kMergeFanIn runs
// of a tier merge into one of the next, so a lookup asks at most
// kMergeFanIn - 1 runs per tier. The decisions are those of the set in
// memory: a key is in one place only (the set or one run), with its first
// ref.
class KeyRuns {
 public:
  // The runs' scratch file in dir ("" for TMPDIR or /tmp); null when no
  // scratch file can be made there or in TMPDIR.
  static std::unique_ptr<KeyRuns> open(const std::string& dir);

  // One more run of `entries` ({key, ref as uint64}; sorted here, then
  // cleared). No key may be in an earlier run (the caller has asked find()
  // for each). A write that fails throws DataError and adds no run.
  void add_run(std::vector<RunEntry>& entries);
  // Merges kMergeFanIn runs of a tier into one of the next while the newest
  // runs allow. A write that fails throws DataError and leaves the runs as
  // they were (the merge is tried again at the next call).
  void merge_full_tiers();
  // True when a run holds key, with its ref in *ref.
  bool find(uint64_t key, int64_t* ref) const;
  // Calls f(key, ref) for every key of every run (reads the whole file).
  template <class F>
  void for_each(F&& f) const {
    for (const SortedRun& r : runs_) {
      file_->for_each(r, [&](const RunEntry& e) { f(e.key, static_cast<int64_t>(e.value)); });
    }
  }

  uint64_t size() const { return keys_; }
  size_t runs() const { return runs_.size(); }
  uint64_t memory_bytes() const;

 private:
  explicit KeyRuns(std::unique_ptr<RunFile> file) : file_(std::move(file)) {}

  std::unique_ptr<RunFile> file_;
  std::vector<SortedRun> runs_;  // tiers never increase from front to back
  uint64_t keys_ = 0;
};

// The pipeline's StreamDeduplicatorOptions::memory_keys: 65,536 (~1.3 MB of
// set with refs), or LUMINAMOON_DEDUP_MEMORY_KEYS.
uint64_t exact_dedup_memory_keys();

}  // namespace luminamoon
