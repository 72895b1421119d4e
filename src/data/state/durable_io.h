// Durable file operations for the commit protocol: write to a temporary name,
// fsync, rename into place, fsync the directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "luminamoon/data_error.h"

namespace luminamoon::durable {

// write(2) until every byte is out (EINTR retried); DataError(kOutput) naming
// `path` otherwise.
void write_all(int fd, std::string_view bytes, const std::string& path);
// pwrite(2) of every byte at `offset` (EINTR retried), the same errors. For
// files filled by appends at an offset their owner tracks: a write that fails
// part way moves no file position, so the next one lands where it should.
void pwrite_all(int fd, std::string_view bytes, uint64_t offset, const std::string& path);
// Writes `bytes` to `path` atomically: `path`.tmp, fsync, rename, fsync dir.
void write_file(const std::string& path, std::string_view bytes);
// Fsyncs an existing file or directory (throws DataError(kOutput) on failure).
void fsync_path(const std::string& path);
void fsync_parent_dir(const std::string& path);
// Renames and then fsyncs the destination's directory.
void rename_durably(const std::string& from, const std::string& to);
std::string read_file(const std::string& path);
// pread(2) of exactly n bytes at `offset` (EINTR retried); a short file or a
// read error is DataError(kind) naming `path` and `operation`.
void pread_exact(int fd, void* dst, size_t n, uint64_t offset, const std::string& path, const char* operation,
                 DataErrorKind kind);
// Size and CRC-32 (zlib) of a file, read in 1 MiB chunks; nullopt when it
// cannot be opened (missing).
struct FileDigest {
  uint64_t size = 0;
  uint32_t crc32 = 0;
};
std::optional<FileDigest> file_digest(const std::string& path);
bool exists(const std::string& path);
// An unnamed scratch file (O_TMPFILE, else a named one unlinked at once) in
// dir, or TMPDIR, or /tmp when dir is "" or refuses one; -1 where none can be
// made. *where names the directory used, for error messages. The file
// vanishes with its descriptor: nothing is left behind by a crash.
int open_scratch_file(const std::string& dir, std::string* where);
void make_dirs(const std::string& path);

// An output file filled by appends and published by finish(): the bytes go
// to `final_path`.tmp and only appear under the final name once fsynced.
// Its written pages leave the page cache as the file grows (Note [written
// pages dropped]).
class PendingFile {
 public:
  explicit PendingFile(std::string final_path);
  ~PendingFile();  // an unfinished file is removed
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  void append(std::string_view bytes);
  // For a writer that writes to fd() itself: bytes [0, end) are in the file.
  // Starts their writeback and drops the pages of the windows already on disk.
  void written_up_to(uint64_t end);
  static constexpr uint64_t kWritebackWindow = uint64_t{8} << 20;
  int fd() const { return fd_; }
  const std::string& temp_path() const { return temp_path_; }
  const std::string& final_path() const { return final_path_; }
  uint64_t bytes_written() const { return bytes_; }
  // fsync, close, rename into place, fsync the directory.
  void finish();

 private:
  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint64_t writeback_started_ = 0;  // [0, this) is on its way to the disk, a whole number of windows
};

}  // namespace luminamoon::durable
