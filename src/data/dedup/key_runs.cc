// KeyRuns (Note [exact-dedup keys on disk] in key_runs.h).
#include "data/dedup/key_runs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "data/state/durable_io.h"

namespace luminamoon {

uint64_t exact_dedup_memory_keys() {
  const char* env = std::getenv("LUMINAMOON_DEDUP_MEMORY_KEYS");
  const unsigned long long n = env && *env ? std::strtoull(env, nullptr, 10) : 0;
  return n > 0 ? n : uint64_t{65536};
}

std::unique_ptr<KeyRuns> KeyRuns::open(const std::string& dir) {
  std::string where;
  const int fd = durable::open_scratch_file(dir, &where);
  if (fd < 0) return nullptr;
  return std::unique_ptr<KeyRuns>(new KeyRuns(fd, where + "/(dedup key runs)"));
}

KeyRuns::~KeyRuns() { ::close(fd_); }

void KeyRuns::add_run(std::vector<Entry>& entries) {
  if (entries.empty()) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) { return x.key < y.key; });
  append_run(entries.data(), entries.size(), 0);
  entries.clear();
}

void KeyRuns::merge_full_tiers() {
  while (runs_.size() >= kMergeFanIn && runs_[runs_.size() - kMergeFanIn].tier == runs_.back().tier) {
    merge_last_runs();
  }
}

void KeyRuns::append_run(const Entry* entries, size_t n, int tier) {
  Run r;
  r.offset = file_end_;
  r.count = n;
  r.tier = tier;
  r.bloom = BlockedBloom(n);
  r.fences.reserve((n + kPageEntries - 1) / kPageEntries);
  for (size_t i = 0; i < n; ++i) {
    if (i % kPageEntries == 0) r.fences.push_back(entries[i].key);
    r.bloom.add(entries[i].key);
  }
  write_entries(entries, n);  // a failed write adds no run
  runs_.push_back(std::move(r));
  keys_ += n;
}

void KeyRuns::merge_last_runs() {
  // A page of each input and a 64 KB output buffer at a time: the merge's
  // memory does not grow with the runs.
  struct Cursor {
    const Run* run;
    uint64_t next = 0;  // the next entry of the run to read into page
    std::vector<Entry> page;
    size_t at = 0;
    bool refill(const KeyRuns& self) {
      if (next >= run->count) return false;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPageEntries, run->count - next));
      page.resize(n);
      self.read_entries(*run, next, n, page.data());
      next += n;
      at = 0;
      return true;
    }
  };
  const size_t first_input = runs_.size() - kMergeFanIn;
  Run merged;
  merged.offset = file_end_;
  merged.tier = runs_[first_input].tier + 1;
  for (size_t i = first_input; i < runs_.size(); ++i) merged.count += runs_[i].count;
  merged.bloom = BlockedBloom(static_cast<size_t>(merged.count));
  merged.fences.reserve(static_cast<size_t>((merged.count + kPageEntries - 1) / kPageEntries));
  std::vector<Cursor> cursors;
  for (size_t i = first_input; i < runs_.size(); ++i) {
    Cursor c{&runs_[i]};
    if (c.refill(*this)) cursors.push_back(std::move(c));
  }
  std::vector<Entry> out;
  out.reserve(16 * kPageEntries);
  uint64_t written = 0;
  while (!cursors.empty()) {
    size_t best = 0;
    for (size_t c = 1; c < cursors.size(); ++c) {
      if (cursors[c].page[cursors[c].at].key < cursors[best].page[cursors[best].at].key) best = c;
    }
    Cursor& c = cursors[best];
    const Entry e = c.page[c.at];
    if (written % kPageEntries == 0) merged.fences.push_back(e.key);
    merged.bloom.add(e.key);
    out.push_back(e);
    ++written;
    if (out.size() == out.capacity()) {
      write_entries(out.data(), out.size());
      out.clear();
    }
    if (++c.at == c.page.size() && !c.refill(*this)) cursors.erase(cursors.begin() + static_cast<std::ptrdiff_t>(best));
  }
  write_entries(out.data(), out.size());  // a failed write leaves the inputs as they were
  for (size_t i = first_input; i < runs_.size(); ++i) release(runs_[i]);
  runs_.resize(first_input);
  runs_.push_back(std::move(merged));
}

bool KeyRuns::find(uint64_t key, int64_t* ref) const {
  Entry page[kPageEntries];
  for (const Run& r : runs_) {
    if (!r.bloom.may_contain(key)) continue;
    // Keys are distinct: only the last page starting at or below key can hold it.
    const auto fence = std::upper_bound(r.fences.begin(), r.fences.end(), key);
    if (fence == r.fences.begin()) continue;
    const uint64_t first = static_cast<uint64_t>(fence - r.fences.begin() - 1) * kPageEntries;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPageEntries, r.count - first));
    read_entries(r, first, n, page);
    const Entry* e = std::lower_bound(page, page + n, key, [](const Entry& x, uint64_t k) { return x.key < k; });
    if (e != page + n && e->key == key) {
      *ref = e->ref;
      return true;
    }
  }
  return false;
}

uint64_t KeyRuns::memory_bytes() const {
  uint64_t bytes = runs_.capacity() * sizeof(Run);
  for (const Run& r : runs_) bytes += r.fences.capacity() * sizeof(uint64_t) + r.bloom.memory_bytes();
  return bytes;
}

void KeyRuns::read_entries(const Run& run, uint64_t first, size_t n, Entry* out) const {
  durable::pread_exact(fd_, out, n * sizeof(Entry), run.offset + first * sizeof(Entry), what_, "read dedup key runs",
                       DataErrorKind::kOutput);
}

void KeyRuns::write_entries(const Entry* entries, size_t n) {
  const std::string_view bytes(reinterpret_cast<const char*>(entries), n * sizeof(Entry));
  durable::pwrite_all(fd_, bytes, file_end_, what_);
  file_end_ += bytes.size();
}

void KeyRuns::release(const Run& run) {
#ifdef FALLOC_FL_PUNCH_HOLE
  // Best effort: where the file system has no holes, the bytes stay until the file closes.
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(run.offset),
                    static_cast<off_t>(run.count * sizeof(Entry)));
#else
  (void)run;
#endif
}

}  // namespace luminamoon
