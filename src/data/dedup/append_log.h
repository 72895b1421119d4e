// AppendLog: an append-only file of fixed-width records in CRC'd blocks, the
// storage of the exact-dedup WAL (.dedup) and of the LSH index (.lsh).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "luminamoon/dedup_wal.h"

namespace luminamoon {

// Note [AppendLog format]
// All integers little-endian.
//   header, 64 bytes: magic[8], version u16, flags u16, record_size u32,
//     params u64[5], reserved u32 (0), crc32 u32 (IEEE, over bytes 0..59).
//   then blocks, each: block magic u32 ("LMBK"), record_count u32 (>= 1),
//     payload_crc u32 (over the payload), header_crc u32 (over the block's
//     first 12 bytes), payload = record_count * record_size bytes.
// The header is written to `path`.tmp, fsynced and renamed into place, so a
// log either has a whole header or does not exist.
// A block that fails its checks is a torn tail when no valid block follows it
// anywhere in the file (a killed or powered-off writer): it and everything
// after it are cut (ftruncate + fsync) and never replayed. A bad block with a
// valid block after it is damage to committed data: DataError(kStateCorrupt),
// never a silent loss.
//
// Note [WAL sync]
// flush() writes the pending records as one block with write(2) (a process
// killed afterwards keeps it); commit() flushes and, under WalSync::kFdatasync,
// fdatasyncs, so that after it returns the block survives a power loss too.
// Nothing is written by append() alone: the pipeline orders commit() before
// its .meta checkpoint, and a resumed run passes the checkpoint's
// committed_position() back as resume_position so that blocks flushed after
// that checkpoint are cut as well. A block holds at most kMaxBlockPayload
// bytes; a larger flush writes several blocks in order (a crash in the middle
// keeps a prefix of them).
inline constexpr size_t kAppendLogHeaderBytes = 64;
inline constexpr size_t kAppendLogBlockHeaderBytes = 16;
inline constexpr size_t kMaxBlockPayload = size_t{16} << 20;

struct AppendLogFormat {
  std::array<char, 8> magic{};
  uint16_t version = 1;
  uint16_t flags = 0;
  uint32_t record_size = 8;
  std::array<uint64_t, 5> params{};
  const char* what = "log";  // names the log in messages, e.g. "dedup WAL"
};

class AppendLog {
 public:
  using RecordSink = std::function<void(const uint8_t* records, size_t count)>;

  // Opens (replaying every valid block into `sink`, in order) or creates the
  // log. A header that differs from `format` (another kind of log, other
  // parameters) is DataError(kUsage); a damaged one DataError(kStateCorrupt).
  AppendLog(const WalOptions& options, const AppendLogFormat& format, const RecordSink& sink);
  ~AppendLog();
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;

  void append(const void* records, size_t count);  // kept pending until flush()
  void flush();
  void commit();
  uint64_t position() const { return position_; }  // bytes written so far
  uint64_t committed_position() const { return committed_; }
  size_t pending_records() const { return pending_.size() / format_.record_size; }
  const WalReplayStats& replay_stats() const { return stats_; }
  const std::string& path() const { return options_.path; }

 private:
  void create();
  void replay(const RecordSink& sink);
  void write_block(const uint8_t* payload, size_t count);
  [[noreturn]] void fail(const char* operation) const;

  WalOptions options_;
  AppendLogFormat format_;
  int fd_ = -1;
  uint64_t position_ = 0;
  uint64_t committed_ = 0;
  std::vector<uint8_t> pending_;
  WalReplayStats stats_;
};

// Little-endian stores and loads (the logs' byte order on every host).
void store_le64(uint8_t* p, uint64_t v);
uint64_t load_le64(const uint8_t* p);

}  // namespace luminamoon
