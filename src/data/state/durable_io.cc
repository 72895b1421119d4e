// Durable file operations (see durable_io.h): every failure is a DataError
// naming the operation, the path and the system's reason.
#include "data/state/durable_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/state/crash_point.h"
#include "luminamoon/data_error.h"

namespace luminamoon::durable {
namespace {

[[noreturn]] void fail(const char* operation, const std::string& path) {
  throw DataError(DataErrorKind::kOutput,
                  std::string("[") + operation + "] " + path + ": " + std::strerror(errno));
}

std::string parent_of(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void write_all(int fd, std::string_view bytes, const std::string& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", path);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void pwrite_all(int fd, std::string_view bytes, uint64_t offset, const std::string& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::pwrite(fd, p, left, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", path);
    }
    p += n;
    left -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open for fsync", path);
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    fail("fsync", path);
  }
  ::close(fd);
}

void fsync_parent_dir(const std::string& path) { fsync_path(parent_of(path)); }

void rename_durably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("rename", from + " -> " + to);
  fsync_parent_dir(to);
}

void write_file(const std::string& path, std::string_view bytes) {
  PendingFile file(path);
  file.append(bytes);
  file.finish();
}

namespace {

// Reads an open descriptor to its end in chunks of `chunk` bytes, handing
// each to `consume`; closes it. DataError(kInput) naming `path` on failure.
template <class F>
void read_chunks(int fd, const std::string& path, size_t chunk, F&& consume) {
  std::vector<char> buf(chunk);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      throw DataError(DataErrorKind::kInput, "[read] " + path + ": " + std::strerror(saved));
    }
    if (n == 0) break;
    consume(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
}

}  // namespace

void pread_exact(int fd, void* dst, size_t n, uint64_t offset, const std::string& path, const char* operation,
                 DataErrorKind kind) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw DataError(kind, std::string("[") + operation + "] " + path + ": " +
                                                            (got < 0 ? std::strerror(errno) : "file shorter than written"));
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError(DataErrorKind::kInput, "[open] " + path + ": " + std::strerror(errno));
  }
  std::string out;
  read_chunks(fd, path, size_t{1} << 16, [&](const char* p, size_t n) { out.append(p, n); });
  return out;
}

std::optional<FileDigest> file_digest(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  FileDigest digest;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  read_chunks(fd, path, size_t{1} << 20, [&](const char* p, size_t n) {
    crc = ::crc32_z(crc, reinterpret_cast<const Bytef*>(p), n);
    digest.size += n;
  });
  digest.crc32 = static_cast<uint32_t>(crc);
  return digest;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    throw DataError(DataErrorKind::kOutput, "[mkdir] " + path + ": " + ec.message());
  }
}

PendingFile::PendingFile(std::string final_path)
    : final_path_(std::move(final_path)), temp_path_(final_path_ + ".tmp") {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", temp_path_);
}

PendingFile::~PendingFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void PendingFile::append(std::string_view bytes) {
  write_all(fd_, bytes, temp_path_);
  bytes_ += bytes.size();
  written_up_to(bytes_);
}

// Note [written pages dropped]: an output part is written once and not read
// back by the run, yet each page it passes through stays in the page cache,
// so a run's output grows the cache by its own size: fresh pages to allocate
// (and, under memory pressure, others' pages to evict). On the 2-core
// Firecracker VM of docs/benchmarks.md a fresh page costs ~18 us of system
// time (the host backs it on first touch): a 45 MB NDJSON part took 0.20 s of
// system time against 0.03 s where the previous part's pages had been freed.
// So, as streaming writers do (dd's oflag=nocache), each complete window of
// kWritebackWindow bytes is sent to the disk when the next one starts, and the
// window before it, written back by then, is dropped: a writer's footprint in
// the cache stays ~2 windows, reused window after window. These calls are
// advice: sync_file_range and posix_fadvise failing (a file system that does
// not support them) changes nothing, and a write-back error still surfaces at
// finish()'s fsync, which alone makes the file durable.
void PendingFile::written_up_to(uint64_t end) {
#ifdef __linux__
  while (writeback_started_ + kWritebackWindow <= end) {
    ::sync_file_range(fd_, static_cast<off_t>(writeback_started_), static_cast<off_t>(kWritebackWindow),
                      SYNC_FILE_RANGE_WRITE);
    writeback_started_ += kWritebackWindow;
    if (writeback_started_ >= 2 * kWritebackWindow) {
      const auto before = static_cast<off_t>(writeback_started_ - 2 * kWritebackWindow);
      const auto window = static_cast<off_t>(kWritebackWindow);
      ::sync_file_range(fd_, before, window,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      ::posix_fadvise(fd_, before, window, POSIX_FADV_DONTNEED);
    }
  }
#else
  (void)end;
#endif
}

void PendingFile::finish() {
  if (::fsync(fd_) != 0) fail("fsync", temp_path_);
  crash_point("file_synced");  // fsynced under the temporary name, not yet renamed
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);  // clean now (Note [written pages dropped])
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("close", temp_path_);
  }
  fd_ = -1;
  rename_durably(temp_path_, final_path_);
}

namespace {

int open_unnamed(const std::string& dir) {
#ifdef O_TMPFILE
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
#endif
  std::string name = dir + "/lm-scratch-XXXXXX";
  const int named = ::mkstemp(name.data());
  if (named >= 0) ::unlink(name.c_str());
  return named;
}

std::string scratch_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  const char* env = std::getenv("TMPDIR");
  return env && *env ? env : "/tmp";
}

}  // namespace

int open_scratch_file(const std::string& dir, std::string* where) {
  *where = scratch_dir(dir);
  int fd = open_unnamed(*where);
  if (fd < 0 && !dir.empty()) fd = open_unnamed(*where = scratch_dir(""));
  return fd;
}

}  // namespace luminamoon::durable
