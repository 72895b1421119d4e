// Durability settings shared by the exact-dedup WAL (.dedup) and the MinHash
// LSH index log (.lsh): how a commit is made durable and where a resumed run
// cuts the log back to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace luminamoon {

// What commit() does after the pending block is written (see Note [WAL sync]
// in src/data/dedup/append_log.h).
enum class WalSync {
  kFdatasync,  // default: commit() returns once the block is on stable storage
  kNone,       // commit() only write(2)s: survives a killed process, not a power loss
};

struct WalOptions {
  std::string path;  // empty: in memory only, nothing persisted
  WalSync sync = WalSync::kFdatasync;
  // Bytes of the log that a checkpoint recorded (committed_position() at the
  // time). The log is replayed up to exactly there and the rest is cut; it
  // must be a block boundary inside the valid log, else DataError(kStateCorrupt);
  // 0 means "nothing committed" (header only). Unset: replay every valid
  // block (a torn tail is still cut).
  std::optional<uint64_t> resume_position;
  // Test hook: write each block in two write(2) calls this far apart, so that a
  // test can kill the process between them and leave a torn tail.
  unsigned split_write_pause_us_for_tests = 0;
};

// What opening a log found.
struct WalReplayStats {
  uint64_t blocks = 0;          // valid blocks replayed
  uint64_t records = 0;         // records in them
  uint64_t valid_bytes = 0;     // header + replayed blocks
  uint64_t cut_bytes = 0;       // torn tail (or post-checkpoint bytes) removed
};

}  // namespace luminamoon
