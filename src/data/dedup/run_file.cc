// RunFile (Note [sorted runs on disk] in run_file.h).
#include "data/dedup/run_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "data/state/durable_io.h"

namespace luminamoon {

RunFile::RunFile(const std::string& dir, const std::string& label) {
  fd_ = durable::open_scratch_file(dir, &what_);
  what_ += "/(" + label + ")";
}

RunFile::~RunFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t RunFile::append(const RunEntry* entries, size_t n) {
  if (fd_ < 0) {
    const uint64_t at = memory_.size();
    memory_.insert(memory_.end(), entries, entries + n);
    return at;
  }
  const std::string_view bytes(reinterpret_cast<const char*>(entries), n * sizeof(RunEntry));
  durable::pwrite_all(fd_, bytes, end_ * sizeof(RunEntry), what_);
  const uint64_t at = end_;
  end_ += n;
  return at;
}

SortedRun RunFile::write(std::span<const RunEntry> sorted, int tier) {
  SortedRun r;
  r.count = sorted.size();
  r.tier = tier;
  r.bloom = BlockedBloom(sorted.size());
  r.fences.reserve((sorted.size() + kPageEntries - 1) / kPageEntries);
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i % kPageEntries == 0) r.fences.push_back(sorted[i].key);
    r.bloom.add(sorted[i].key);
  }
  r.offset = append(sorted.data(), sorted.size());
  return r;
}

SortedRun RunFile::merge(std::span<const SortedRun* const> inputs, int tier) {
  struct Cursor {
    const SortedRun* run;
    uint64_t next = 0;  // the next entry of the run to read into page
    std::vector<RunEntry> page;
    size_t at = 0;
  };
  auto refill = [&](Cursor& c) {
    if (c.next >= c.run->count) return false;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPageEntries, c.run->count - c.next));
    c.page.resize(n);
    read(*c.run, c.next, n, c.page.data());
    c.next += n;
    c.at = 0;
    return true;
  };
  auto less = [](const RunEntry& x, const RunEntry& y) { return x.key != y.key ? x.key < y.key : x.value < y.value; };
  SortedRun merged;
  merged.tier = tier;
  for (const SortedRun* in : inputs) merged.count += in->count;
  merged.bloom = BlockedBloom(static_cast<size_t>(merged.count));
  merged.fences.reserve(static_cast<size_t>((merged.count + kPageEntries - 1) / kPageEntries));
  std::vector<Cursor> cursors;
  for (const SortedRun* in : inputs) {
    Cursor c{in};
    if (refill(c)) cursors.push_back(std::move(c));
  }
  std::vector<RunEntry> out;
  out.reserve(16 * kPageEntries);
  uint64_t written = 0;
  bool first_chunk = true;
  auto flush = [&] {
    const uint64_t at = append(out.data(), out.size());
    if (first_chunk) merged.offset = at;
    first_chunk = false;
    out.clear();
  };
  while (!cursors.empty()) {
    size_t best = 0;
    for (size_t c = 1; c < cursors.size(); ++c) {
      if (less(cursors[c].page[cursors[c].at], cursors[best].page[cursors[best].at])) best = c;
    }
    Cursor& c = cursors[best];
    const RunEntry e = c.page[c.at];
    if (written % kPageEntries == 0) merged.fences.push_back(e.key);
    merged.bloom.add(e.key);
    out.push_back(e);
    ++written;
    if (out.size() == out.capacity()) flush();
    if (++c.at == c.page.size() && !refill(c)) cursors.erase(cursors.begin() + static_cast<std::ptrdiff_t>(best));
  }
  flush();
  return merged;
}

void RunFile::release(const SortedRun& run) {
#ifdef FALLOC_FL_PUNCH_HOLE
  // Best effort: where the file system has no holes, the bytes stay until the file closes.
  if (fd_ >= 0) {
    (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(run.offset * sizeof(RunEntry)),
                      static_cast<off_t>(run.count * sizeof(RunEntry)));
  }
#else
  (void)run;
#endif
}

void RunFile::read(const SortedRun& run, uint64_t first, size_t n, RunEntry* out) const {
  if (fd_ < 0) {
    std::memcpy(out, memory_.data() + run.offset + first, n * sizeof(RunEntry));
    return;
  }
  durable::pread_exact(fd_, out, n * sizeof(RunEntry), (run.offset + first) * sizeof(RunEntry), what_,
                       "read runs", DataErrorKind::kOutput);
}

}  // namespace luminamoon
