// BandRuns (Note [band runs on disk] in band_runs.h).
#include "data/minhash/band_runs.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace luminamoon {

size_t lsh_tail_documents() {
  const char* env = std::getenv("LUMINAMOON_LSH_TAIL_DOCS");
  const unsigned long long n = env && *env ? std::strtoull(env, nullptr, 10) : 0;
  return n > 0 ? static_cast<size_t>(n) : size_t{16384};
}

BandRuns::BandRuns(int bands, const std::string& dir) : bands_(bands), file_(dir, "LSH band runs") {}

void BandRuns::add_run(const std::function<void(int band, std::vector<RunEntry>& entries)>& fill) {
  Run run;
  run.bands.reserve(static_cast<size_t>(bands_));
  std::vector<RunEntry> entries;
  for (int b = 0; b < bands_; ++b) {
    entries.clear();
    fill(b, entries);
    std::sort(entries.begin(), entries.end(),
              [](const RunEntry& x, const RunEntry& y) { return x.key != y.key ? x.key < y.key : x.value < y.value; });
    run.bands.push_back(file_.write(entries, 0));
  }
  runs_.push_back(std::move(run));  // every band written: a failed write threw before this
}

void BandRuns::merge_full_tiers() {
  if (!file_.on_disk()) return;  // in memory, a merge would only add a copy
  while (newest_runs_share_a_tier(runs_.size(), [&](size_t i) { return runs_[i].tier; })) {
    const size_t first = runs_.size() - RunFile::kMergeFanIn;
    Run merged;
    merged.tier = runs_[first].tier + 1;
    for (int b = 0; b < bands_; ++b) {
      std::vector<const SortedRun*> inputs;
      for (size_t i = first; i < runs_.size(); ++i) inputs.push_back(&runs_[i].bands[static_cast<size_t>(b)]);
      merged.bands.push_back(file_.merge(inputs, merged.tier));
    }
    for (size_t i = first; i < runs_.size(); ++i) {
      for (const SortedRun& r : runs_[i].bands) file_.release(r);
    }
    runs_.resize(first);
    runs_.push_back(std::move(merged));
  }
}

void BandRuns::find(int band, uint64_t key, std::vector<uint32_t>& ids) const {
  for (const Run& run : runs_) {
    file_.find(run.bands[static_cast<size_t>(band)], key,
               [&](const RunEntry& e) { ids.push_back(static_cast<uint32_t>(e.value)); });
  }
}

uint64_t BandRuns::memory_bytes() const {
  uint64_t bytes = file_.memory_bytes();
  for (const Run& run : runs_) {
    for (const SortedRun& r : run.bands) bytes += RunFile::memory_bytes(r);
  }
  return bytes;
}

}  // namespace luminamoon
