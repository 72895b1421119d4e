// StreamDeduplicator: exact deduplication of a document stream by the XXH3-64
// of each text, first occurrence kept, seen set persisted in a .dedup WAL.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "luminamoon/dedup_wal.h"
#include "luminamoon/text_batch.h"

namespace luminamoon {

// Which bytes are hashed.
enum class DedupKey : uint16_t {
  kText = 0,            // the (cleaned) text as given
  kNormalizedText = 1,  // normalize_for_dedup() of it (see text_normalize.h)
};

struct StreamDeduplicatorOptions {
  DedupKey key = DedupKey::kText;
  // Remember, per distinct document, the 64-bit ref of its first occurrence so
  // that each drop names the document it duplicated. Costs a second 8-byte
  // array beside the hash slots (the hash set alone stays <= 16 B/document).
  bool track_matches = true;
  // Distinct documents expected: the set is sized for them up front, so it
  // never grows (a growth briefly holds the old and the new table, 2.5x).
  uint64_t expected_distinct = 0;
  WalOptions wal;  // wal.path empty: in memory only
  // With memory_keys > 0, at most that many distinct keys stay in the set in
  // memory; older ones move to sorted runs in an unnamed scratch file in
  // spill_dir ("": TMPDIR or /tmp), with ~1.3 bytes a key of Bloom filter and
  // fences left in memory (Note [exact-dedup keys on disk]). The decisions
  // and matched refs are the same. 0: every key in memory, as where no
  // scratch file can be made.
  uint64_t memory_keys = 0;
  std::string spill_dir;
  int num_threads = 0;  // hashing threads; 0: data_num_threads() (data_threads.h)
};

// The value `matched` holds for a kept document.
inline constexpr int64_t kNoMatch = -1;

// One caller at a time (not thread-safe; the Python wrapper holds a lock).
// Hashing inside add() runs on num_threads threads.
class StreamDeduplicator {
 public:
  explicit StreamDeduplicator(StreamDeduplicatorOptions options = {});
  ~StreamDeduplicator();
  StreamDeduplicator(StreamDeduplicator&&) noexcept;
  StreamDeduplicator& operator=(StreamDeduplicator&&) noexcept;

  // Decides every document of `batch` in stream order. keep[i] = 1 for a first
  // occurrence (also within the batch), 0 for a duplicate. matched[i] (may be
  // empty) = the ref of the first occurrence for a drop, kNoMatch when kept or
  // when track_matches is off. refs (may be empty) = the caller's 64-bit id of
  // each document (>= 0; e.g. a packed shard position); empty: the count of
  // documents added to this object before it (across batches; it restarts at
  // 0 after a reopen, so a resumed caller passes its own refs).
  void add(const TextBatchView& batch, std::span<const int64_t> refs, std::span<uint8_t> keep,
           std::span<int64_t> matched);
  // Same with precomputed keys (key_of()).
  void add_keys(std::span<const uint64_t> keys, std::span<const int64_t> refs,
                std::span<uint8_t> keep, std::span<int64_t> matched);

  // The key of one text under this deduplicator's DedupKey.
  uint64_t key_of(std::string_view text) const;
  static uint64_t key_of(std::string_view text, DedupKey key);

  // WAL: flush() writes the hashes added since the last flush as one CRC'd
  // block (survives a killed process); commit() flushes and, under
  // WalSync::kFdatasync, fdatasyncs. Both are no-ops without a WAL path.
  void flush();
  void commit();
  // Bytes of the WAL as of the last commit(): what a checkpoint records and
  // later passes back as WalOptions::resume_position.
  uint64_t committed_position() const;
  const WalReplayStats& replay_stats() const;

  bool contains_key(uint64_t key) const;
  uint64_t distinct() const;           // distinct keys held
  uint64_t documents_seen() const;     // documents added (replayed ones excluded)
  uint64_t set_memory_bytes() const;   // the hash slots (the <= 16 B/document bound)
  uint64_t memory_bytes() const;       // slots + match refs + the spilled runs' filters and fences
  uint64_t spilled_keys() const;       // distinct keys in the scratch file's runs
  std::vector<uint64_t> keys() const;  // every key held, unordered (tests, export)
  const StreamDeduplicatorOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminamoon
