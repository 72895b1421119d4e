// BandRuns: the band keys of the LSH index's older kept documents, as tiered
// sorted runs of a RunFile, one per band (Note [band runs on disk]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dedup/run_file.h"

namespace luminamoon {

// Note [band runs on disk]
// The per-band hash tables (band key -> first kept document, plus the chains
// of documents sharing a key) were the part of the LSH index that still grew
// with the corpus, ~190 bytes per kept document: 100 MB of the CLI's peak at
// 500k kept documents. The index now keeps them in memory only for the last
// tail_documents kept documents (lsh_tail_documents(): 16,384, or
// LUMINAMOON_LSH_TAIL_DOCS); when the tail is full its keys become one run:
// per band, the (key, id) pairs as a sorted run of a scratch file (Note
// [sorted runs on disk]: a Bloom filter of 10 bits a key and page fences
// left in memory). A lookup checks the tail's table and, in every run whose
// filter may hold the key, reads the pages that can hold it and reports
// every id stored with exactly that key. The candidates are those of the
// tables before (every kept document sharing a band key; the earliest wins a
// tie whatever the order), so the decisions are the same; memory per kept
// document is ~10 bytes of filter (its ref is in the signature file since
// session 12: Note [signatures on disk]), and the tail's tables at most ~16
// MB. Runs were never merged until session 13, so a new document asked
// bands x (kept / tail) filters: 560 at 4.6 million kept documents, 37,000
// at 300 million. They are now tiered as the exact-dedup runs are (four of
// a tier merge into one of the next), so it asks bands x (at most 3 per
// tier, logarithmically many tiers), and the tail could shrink from 65,536
// to 16,384 documents: -8 MB at 2 GB of input, -3 MB at 0.1 GB, the same
// CPU (4,096 saved nothing more; issue 15, session 13).
//
// Note [one band at a time]
// A flush gathered every band's pairs of the tail first: 8 bands x 65,536
// documents x 16 bytes, 8.4 MB on top of the tail's tables, live at the 2 GB
// CLI run's peak (heaptrack, issue 15, session 12). The run is now built a
// band at a time in one reused vector (1 MB).
class BandRuns {
 public:
  BandRuns(int bands, const std::string& dir);

  // One run, a band at a time: fill(b, entries) puts band b's pairs {key,
  // id} into the emptied `entries` in any order (sorted here). One band's
  // pairs are in memory at a time (Note [one band at a time]). A write that
  // fails throws DataError and adds no run.
  void add_run(const std::function<void(int band, std::vector<RunEntry>& entries)>& fill);
  // Merges kMergeFanIn runs of a tier (every band) into one of the next
  // while the newest runs allow (Note [sorted runs on disk]); a write that
  // fails throws DataError and leaves the runs as they were. Where the runs
  // are in memory (no scratch file) nothing is merged.
  void merge_full_tiers();
  // Appends to `ids` every id stored with `key` in band b, over all runs.
  void find(int band, uint64_t key, std::vector<uint32_t>& ids) const;
  size_t runs() const { return runs_.size(); }
  uint64_t memory_bytes() const;

 private:
  struct Run {
    int tier = 0;
    std::vector<SortedRun> bands;
  };

  int bands_;
  RunFile file_;
  std::vector<Run> runs_;  // tiers never increase from front to back
};

// The tail of kept documents whose band keys stay in memory (Note [band runs on disk]).
size_t lsh_tail_documents();

}  // namespace luminamoon
