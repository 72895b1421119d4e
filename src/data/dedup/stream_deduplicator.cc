// StreamDeduplicator: parallel XXH3-64 keys, then a sequential pass over the
// HashKeySet (and, past memory_keys, the KeyRuns on disk) in stream order,
// new keys appended to the .dedup WAL.
#include "luminamoon/stream_deduplicator.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>
#include <optional>
#include <string>

#include "data/common/parallel.h"
#include "data/dedup/append_log.h"
#include "data/dedup/hash_key_set.h"
#include "data/dedup/key_runs.h"
#include "data/dedup/shared_arena.h"
#include "data/dedup/text_normalize.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

// WAL record: the key, then (with track_matches) the first occurrence's ref.
AppendLogFormat wal_format(const StreamDeduplicatorOptions& o) {
  AppendLogFormat f;
  f.magic = {'L', 'M', 'D', 'E', 'D', 'U', 'P', '1'};
  f.flags = static_cast<uint16_t>(static_cast<uint16_t>(o.key) | (o.track_matches ? 0x100 : 0));
  f.record_size = o.track_matches ? 16 : 8;
  f.what = "dedup WAL";
  return f;
}

void check_sizes(size_t n, std::span<const int64_t> refs, std::span<uint8_t> keep,
                 std::span<int64_t> matched) {
  if (keep.size() != n || (!refs.empty() && refs.size() != n) ||
      (!matched.empty() && matched.size() != n)) {
    throw DataError(DataErrorKind::kUsage,
                    "StreamDeduplicator.add: keep/refs/matched must have one entry per document");
  }
  for (int64_t r : refs) {
    if (r < 0) throw DataError(DataErrorKind::kUsage, "StreamDeduplicator.add: refs must be >= 0");
  }
}

}  // namespace

struct StreamDeduplicator::Impl {
  StreamDeduplicatorOptions options;
  HashKeySet set;                 // every key, or with spilled runs the newest ones
  std::unique_ptr<KeyRuns> runs;  // Note [exact-dedup keys on disk]; null: all in `set`
  std::optional<AppendLog> wal;
  WalReplayStats no_wal_stats;
  uint64_t seen = 0;

  explicit Impl(StreamDeduplicatorOptions o)
      : options(std::move(o)),
        set(options.track_matches, set_size(options)),
        runs(options.memory_keys > 0 ? KeyRuns::open(options.spill_dir) : nullptr) {
    if (options.key != DedupKey::kText && options.key != DedupKey::kNormalizedText) {
      throw DataError(DataErrorKind::kUsage, "StreamDeduplicator: unknown key mode");
    }
    if (!options.wal.path.empty()) {
      wal.emplace(options.wal, wal_format(options), [this](const uint8_t* r, size_t count) {
        const size_t width = options.track_matches ? 16 : 8;
        int64_t ignored;
        for (size_t i = 0; i < count; ++i, r += width) {
          int64_t ref = options.track_matches ? static_cast<int64_t>(load_le64(r + 8)) : 0;
          insert(load_le64(r), ref, &ignored);
        }
      });
    }
  }

  // The set's first size: expected_distinct, at most memory_keys (it grows
  // from there as before; once it has spilled it starts at memory_keys).
  static size_t set_size(const StreamDeduplicatorOptions& o) {
    const uint64_t expected = o.memory_keys > 0 ? std::min(o.expected_distinct, o.memory_keys) : o.expected_distinct;
    return static_cast<size_t>(std::min<uint64_t>(expected, uint64_t{1} << 40));
  }

  // True when key is new (now held with ref); else *first = its first ref.
  bool insert(uint64_t key, int64_t ref, int64_t* first) {
    if (runs && runs->find(key, first)) return false;  // a key is in one place: a run or the set
    if (!set.insert(key, ref, first)) return false;
    if (runs && set.size() >= options.memory_keys) spill();
    return true;
  }

  // The set's keys become a run on disk; the set starts empty at its full
  // size. A run that cannot be written throws with the set as it was (a
  // merge that cannot be written, with the runs as they were).
  void spill() {
    std::vector<RunEntry> entries;
    entries.reserve(set.size());
    set.for_each([&](uint64_t key, int64_t ref) { entries.push_back({key, static_cast<uint64_t>(ref)}); });
    runs->add_run(entries);
    set = HashKeySet(options.track_matches);  // the old table freed before the new one is made
    set = HashKeySet(options.track_matches, static_cast<size_t>(options.memory_keys));
    runs->merge_full_tiers();
  }

  bool contains(uint64_t key) const {
    int64_t ignored;
    return set.find(key, &ignored) || (runs && runs->find(key, &ignored));
  }
};

StreamDeduplicator::StreamDeduplicator(StreamDeduplicatorOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
StreamDeduplicator::~StreamDeduplicator() = default;
StreamDeduplicator::StreamDeduplicator(StreamDeduplicator&&) noexcept = default;
StreamDeduplicator& StreamDeduplicator::operator=(StreamDeduplicator&&) noexcept = default;

uint64_t StreamDeduplicator::key_of(std::string_view text, DedupKey key) {
  if (key == DedupKey::kNormalizedText) {
    thread_local NormalizedWords normalized;
    normalized.assign(text);
    return XXH3_64bits(normalized.text().data(), normalized.text().size());
  }
  return XXH3_64bits(text.data(), text.size());
}

uint64_t StreamDeduplicator::key_of(std::string_view text) const {
  return key_of(text, impl_->options.key);
}

void StreamDeduplicator::add(const TextBatchView& batch, std::span<const int64_t> refs,
                             std::span<uint8_t> keep, std::span<int64_t> matched) {
  check_sizes(batch.size, refs, keep, matched);
  std::vector<uint64_t> keys(batch.size);
  const DedupKey mode = impl_->options.key;
  auto hash_range = [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) keys[i] = key_of(batch[i], mode);
  };
  // Hashing is memory-bound: threads only pay off on large batches.
  if (batch.total_bytes() < (size_t{1} << 20)) {
    hash_range(tbb::blocked_range<size_t>(0, batch.size));
  } else {
    shared_arena(impl_->options.num_threads).execute([&] {  // Note [a stage's loops run to completion]
      detail::run_to_completion([&] { tbb::parallel_for(tbb::blocked_range<size_t>(0, batch.size, 256), hash_range); });
    });
  }
  add_keys(keys, refs, keep, matched);
}

void StreamDeduplicator::add_keys(std::span<const uint64_t> keys, std::span<const int64_t> refs,
                                  std::span<uint8_t> keep, std::span<int64_t> matched) {
  check_sizes(keys.size(), refs, keep, matched);
  Impl& s = *impl_;
  const bool track = s.options.track_matches;
  constexpr size_t kPrefetchDistance = 8;
  uint8_t record[16];
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + kPrefetchDistance < keys.size()) s.set.prefetch(keys[i + kPrefetchDistance]);
    const int64_t ref = refs.empty() ? static_cast<int64_t>(s.seen + i) : refs[i];
    int64_t first = kNoMatch;
    const bool fresh = s.insert(keys[i], ref, &first);
    keep[i] = fresh ? 1 : 0;
    if (!matched.empty()) matched[i] = fresh || !track ? kNoMatch : first;
    if (fresh && s.wal) {
      store_le64(record, keys[i]);
      if (track) store_le64(record + 8, static_cast<uint64_t>(ref));
      s.wal->append(record, 1);
    }
  }
  s.seen += keys.size();
}

void StreamDeduplicator::flush() {
  if (impl_->wal) impl_->wal->flush();
}
void StreamDeduplicator::commit() {
  if (impl_->wal) impl_->wal->commit();
}
uint64_t StreamDeduplicator::committed_position() const {
  return impl_->wal ? impl_->wal->committed_position() : 0;
}
const WalReplayStats& StreamDeduplicator::replay_stats() const {
  return impl_->wal ? impl_->wal->replay_stats() : impl_->no_wal_stats;
}
bool StreamDeduplicator::contains_key(uint64_t key) const { return impl_->contains(key); }
uint64_t StreamDeduplicator::distinct() const { return impl_->set.size() + spilled_keys(); }
uint64_t StreamDeduplicator::documents_seen() const { return impl_->seen; }
uint64_t StreamDeduplicator::set_memory_bytes() const { return impl_->set.key_bytes(); }
uint64_t StreamDeduplicator::memory_bytes() const {
  return impl_->set.memory_bytes() + (impl_->runs ? impl_->runs->memory_bytes() : 0);
}
uint64_t StreamDeduplicator::spilled_keys() const { return impl_->runs ? impl_->runs->size() : 0; }
std::vector<uint64_t> StreamDeduplicator::keys() const {
  std::vector<uint64_t> out;
  out.reserve(distinct());
  impl_->set.for_each([&](uint64_t k, int64_t) { out.push_back(k); });
  if (impl_->runs) impl_->runs->for_each([&](uint64_t k, int64_t) { out.push_back(k); });
  return out;
}
const StreamDeduplicatorOptions& StreamDeduplicator::options() const { return impl_->options; }

}  // namespace luminamoon
