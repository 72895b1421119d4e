// KeyRuns (Note [exact-dedup keys on disk] in key_runs.h).
#include "data/dedup/key_runs.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace luminamoon {

uint64_t exact_dedup_memory_keys() {
  const char* env = std::getenv("LUMINAMOON_DEDUP_MEMORY_KEYS");
  const unsigned long long n = env && *env ? std::strtoull(env, nullptr, 10) : 0;
  return n > 0 ? n : uint64_t{65536};
}

std::unique_ptr<KeyRuns> KeyRuns::open(const std::string& dir) {
  auto file = std::make_unique<RunFile>(dir, "dedup key runs");
  if (!file->on_disk()) return nullptr;
  return std::unique_ptr<KeyRuns>(new KeyRuns(std::move(file)));
}

void KeyRuns::add_run(std::vector<RunEntry>& entries) {
  if (entries.empty()) return;
  std::sort(entries.begin(), entries.end(), [](const RunEntry& x, const RunEntry& y) { return x.key < y.key; });
  runs_.push_back(file_->write(entries, 0));  // a failed write throws before the push
  keys_ += entries.size();
  entries.clear();
}

void KeyRuns::merge_full_tiers() {
  while (newest_runs_share_a_tier(runs_.size(), [&](size_t i) { return runs_[i].tier; })) {
    const size_t first = runs_.size() - RunFile::kMergeFanIn;
    std::vector<const SortedRun*> inputs;
    for (size_t i = first; i < runs_.size(); ++i) inputs.push_back(&runs_[i]);
    SortedRun merged = file_->merge(inputs, runs_[first].tier + 1);  // a failed write throws here
    for (const SortedRun* in : inputs) file_->release(*in);
    runs_.resize(first);
    runs_.push_back(std::move(merged));
  }
}

bool KeyRuns::find(uint64_t key, int64_t* ref) const {
  for (const SortedRun& r : runs_) {
    bool found = false;
    file_->find(r, key, [&](const RunEntry& e) {
      found = true;
      *ref = static_cast<int64_t>(e.value);
    });
    if (found) return true;
  }
  return false;
}

uint64_t KeyRuns::memory_bytes() const {
  uint64_t bytes = runs_.capacity() * sizeof(SortedRun);
  for (const SortedRun& r : runs_) bytes += RunFile::memory_bytes(r);
  return bytes;
}

}  // namespace luminamoon
