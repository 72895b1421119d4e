// KeyRuns: distinct 64-bit keys, each with a 64-bit ref, as sorted runs in an
// unnamed scratch file; in memory only each run's Bloom filter and page
// fences (Note [exact-dedup keys on disk]).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/common/blocked_bloom.h"

namespace luminamoon {

// Note [exact-dedup keys on disk]
// The exact-dedup set kept every distinct document's key and first ref in
// memory, 20-30 bytes a document at the hash table's load: ~22 MB of the
// CLI's 2 GB peak (issue 15, session 12), 6 GB at 300 million documents.
// With StreamDeduplicatorOptions::memory_keys, the set in memory holds at
// most that many keys; when it is full its (key, ref) pairs become one run
// here: sorted by key, written in 4 KB pages, and kept in memory as a blocked
// Bloom filter (~1.25 bytes a key) and the first key of each page (1/32 byte
// a key). A lookup asks every run's filter and reads (one pread, mostly from
// the page cache) the one page of each run whose filter may hold the key.
// Runs are tiered: kMergeFanIn runs of one tier merge (streamed, a page of
// each at a time) into one run of the next, so the runs a lookup asks stay
// at most (kMergeFanIn - 1) per tier, logarithmically many in the keys, and
// each key is rewritten once per tier. The merged runs' bytes are returned
// to the file system (a punched hole) where it allows. The decisions are
// those of the set in memory: a key is in at most one place (the set or one
// run), so a lookup finds the same first ref.
class KeyRuns {
 public:
  struct Entry {
    uint64_t key;
    int64_t ref;
  };
  static constexpr size_t kPageEntries = 4096 / sizeof(Entry);
  static constexpr size_t kMergeFanIn = 4;

  // The runs' scratch file in dir ("" for TMPDIR or /tmp); null when no
  // scratch file can be made there or in TMPDIR.
  static std::unique_ptr<KeyRuns> open(const std::string& dir);
  ~KeyRuns();
  KeyRuns(const KeyRuns&) = delete;
  KeyRuns& operator=(const KeyRuns&) = delete;

  // One more run of `entries` (sorted here, then cleared). No key may be in
  // an earlier run (the caller has asked find() for each). A write that
  // fails throws DataError and adds no run.
  void add_run(std::vector<Entry>& entries);
  // Merges kMergeFanIn runs of a tier into one of the next while the newest
  // runs allow. A write that fails throws DataError and leaves the runs as
  // they were (the merge is tried again at the next call).
  void merge_full_tiers();
  // True when a run holds key, with its ref in *ref.
  bool find(uint64_t key, int64_t* ref) const;
  // Calls f(key, ref) for every key of every run (reads the whole file).
  template <class F>
  void for_each(F&& f) const {
    std::vector<Entry> page(kPageEntries);
    for (const Run& r : runs_) {
      for (uint64_t first = 0; first < r.count; first += kPageEntries) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kPageEntries, r.count - first));
        read_entries(r, first, n, page.data());
        for (size_t i = 0; i < n; ++i) f(page[i].key, page[i].ref);
      }
    }
  }

  uint64_t size() const { return keys_; }
  size_t runs() const { return runs_.size(); }
  uint64_t memory_bytes() const;

 private:
  struct Run {
    uint64_t offset = 0;  // of its first entry in the file
    uint64_t count = 0;
    int tier = 0;
    std::vector<uint64_t> fences;  // the first key of each page
    BlockedBloom bloom;
  };
  KeyRuns(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  // Appends sorted entries as a run of `tier` (fences, filter, file).
  void append_run(const Entry* entries, size_t n, int tier);
  // The last kMergeFanIn runs, all of one tier, become one run of the next.
  void merge_last_runs();
  void read_entries(const Run& run, uint64_t first, size_t n, Entry* out) const;
  void write_entries(const Entry* entries, size_t n);
  void release(const Run& run);

  int fd_;
  std::string what_;
  uint64_t file_end_ = 0;
  uint64_t keys_ = 0;
  std::vector<Run> runs_;  // tiers never increase from front to back
};

// The pipeline's StreamDeduplicatorOptions::memory_keys: 65,536 (~1.3 MB of
// set with refs), or LUMINAMOON_DEDUP_MEMORY_KEYS.
uint64_t exact_dedup_memory_keys();

}  // namespace luminamoon
