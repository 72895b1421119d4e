// BandRuns: the band keys of the LSH index's older kept documents, as sorted
// runs in an unnamed temporary file, each run with an in-memory Bloom filter
// and page fences (Note [band runs on disk]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/common/blocked_bloom.h"

namespace luminamoon {

// Note [band runs on disk]
// The per-band hash tables (band key -> first kept document, plus the chains
// of documents sharing a key) were the part of the LSH index that still grew
// with the corpus, ~190 bytes per kept document: 100 MB of the CLI's peak at
// 500k kept documents. The index now keeps them in memory only for the last
// tail_documents kept documents (lsh_tail_documents(): 65,536, or
// LUMINAMOON_LSH_TAIL_DOCS); when the tail is full its keys become one run:
// per band, the (key, id) pairs sorted by key, written to the temporary file
// in 4 KB pages, and kept in memory as a blocked Bloom filter (Note [blocked
// Bloom filter]: 10 bits a key, ~1-2% false positives) and the first key of
// each page. A lookup checks the tail's table and, in every run whose filter
// may hold the key, reads the pages that can hold it (one pread, from the
// page cache) and reports every id stored with exactly that key. The
// candidates are those of the tables before (every kept document sharing a
// band key), so the decisions are the same; memory per kept document is
// ~10 bytes of filter (its ref is in the signature file since session 12:
// Note [signatures on disk]), and the tail's tables at most ~16 MB.
//
// Note [one band at a time]
// A flush gathered every band's pairs of the tail first: 8 bands x 65,536
// documents x 16 bytes, 8.4 MB on top of the tail's tables, live at the 2 GB
// CLI run's peak (heaptrack, issue 15, session 12). The run is now built a
// band at a time in one reused vector (1 MB).
class BandRuns {
 public:
  struct Entry {
    uint64_t key;
    uint32_t id;
    uint32_t unused;
  };
  static constexpr size_t kPageEntries = 4096 / sizeof(Entry);

  BandRuns(int bands, const std::string& dir);
  ~BandRuns();
  BandRuns(const BandRuns&) = delete;
  BandRuns& operator=(const BandRuns&) = delete;

  // One run, a band at a time: fill(b, entries) puts band b's (key, id) pairs
  // into the emptied `entries` in any order (sorted here). One band's pairs
  // are in memory at a time (Note [one band at a time]).
  void add_run(const std::function<void(int band, std::vector<Entry>& entries)>& fill);
  // Appends to `ids` every id stored with `key` in band b, over all runs.
  void find(int band, uint64_t key, std::vector<uint32_t>& ids) const;
  size_t runs() const { return runs_.size(); }
  uint64_t memory_bytes() const;

 private:
  struct BandRun {
    uint64_t offset = 0;           // of its first entry in the file (or in memory_)
    uint64_t count = 0;
    std::vector<uint64_t> fences;  // the first key of each page
    BlockedBloom bloom;
  };
  void read_entries(const BandRun& run, size_t first, size_t n, Entry* out) const;

  int bands_;
  int fd_ = -1;                   // the temporary file; -1: the entries stay in memory_
  std::string what_;
  uint64_t file_end_ = 0;
  std::vector<Entry> memory_;     // where no temporary file could be made
  std::vector<std::vector<BandRun>> runs_;  // runs_[r][b]
};

// The tail of kept documents whose band keys stay in memory (Note [band runs on disk]).
size_t lsh_tail_documents();

}  // namespace luminamoon
