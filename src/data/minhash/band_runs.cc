// BandRuns (Note [band runs on disk] in band_runs.h).
#include "data/minhash/band_runs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "data/state/durable_io.h"

namespace luminamoon {

size_t lsh_tail_documents() {
  const char* env = std::getenv("LUMINAMOON_LSH_TAIL_DOCS");
  const unsigned long long n = env && *env ? std::strtoull(env, nullptr, 10) : 0;
  return n > 0 ? static_cast<size_t>(n) : size_t{65536};
}

BandRuns::BandRuns(int bands, const std::string& dir) : bands_(bands) { fd_ = durable::open_scratch_file(dir, &what_); }

BandRuns::~BandRuns() {
  if (fd_ >= 0) ::close(fd_);
}

void BandRuns::add_run(const std::function<void(int band, std::vector<Entry>& entries)>& fill) {
  std::vector<BandRun>& run = runs_.emplace_back(static_cast<size_t>(bands_));
  std::vector<Entry> entries;
  for (int b = 0; b < bands_; ++b) {
    entries.clear();
    fill(b, entries);
    std::sort(entries.begin(), entries.end(),
              [](const Entry& x, const Entry& y) { return x.key != y.key ? x.key < y.key : x.id < y.id; });
    BandRun& r = run[static_cast<size_t>(b)];
    r.count = entries.size();
    r.bloom = BlockedBloom(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i % kPageEntries == 0) r.fences.push_back(entries[i].key);
      r.bloom.add(entries[i].key);
    }
    if (fd_ >= 0) {
      r.offset = file_end_;
      const std::string_view bytes(reinterpret_cast<const char*>(entries.data()), entries.size() * sizeof(Entry));
      durable::pwrite_all(fd_, bytes, file_end_, what_ + "/(LSH band runs)");
      file_end_ += bytes.size();
    } else {
      r.offset = memory_.size();
      memory_.insert(memory_.end(), entries.begin(), entries.end());
    }
  }
}

void BandRuns::read_entries(const BandRun& run, size_t first, size_t n, Entry* out) const {
  if (fd_ < 0) {
    std::memcpy(out, memory_.data() + run.offset + first, n * sizeof(Entry));
    return;
  }
  durable::pread_exact(fd_, out, n * sizeof(Entry), run.offset + first * sizeof(Entry),
                       what_ + "/(LSH band runs)", "read LSH band runs", DataErrorKind::kOutput);
}

void BandRuns::find(int band, uint64_t key, std::vector<uint32_t>& ids) const {
  Entry page[kPageEntries];
  for (const auto& run_bands : runs_) {
    const BandRun& r = run_bands[static_cast<size_t>(band)];
    if (r.count == 0) continue;
    if (!r.bloom.may_contain(key)) continue;
    // Entries equal to the key may begin on the page before the first fence >= key.
    size_t p = static_cast<size_t>(std::lower_bound(r.fences.begin(), r.fences.end(), key) - r.fences.begin());
    if (p > 0) --p;
    for (; p < r.fences.size() && r.fences[p] <= key; ++p) {
      const size_t first = p * kPageEntries, n = std::min<size_t>(kPageEntries, r.count - first);
      read_entries(r, first, n, page);
      for (size_t i = 0; i < n; ++i) {
        if (page[i].key == key) ids.push_back(page[i].id);
      }
      if (page[n - 1].key > key) break;
    }
  }
}

uint64_t BandRuns::memory_bytes() const {
  uint64_t bytes = memory_.capacity() * sizeof(Entry);
  for (const auto& run_bands : runs_) {
    for (const auto& r : run_bands) bytes += r.fences.capacity() * sizeof(uint64_t) + r.bloom.memory_bytes();
  }
  return bytes;
}

}  // namespace luminamoon
