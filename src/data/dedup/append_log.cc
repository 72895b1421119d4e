// AppendLog (see Note [AppendLog format] in append_log.h): replay with torn
// tail detection, CRC'd block appends, fdatasync on commit.
#include "data/dedup/append_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

constexpr uint32_t kBlockMagic = 0x4B424D4Cu;  // "LMBK" read as little-endian u32

void store_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void store_le16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint16_t load_le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

uint32_t crc32_of(const uint8_t* p, size_t n) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes uInt lengths
    uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = ::crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::array<uint8_t, kAppendLogHeaderBytes> encode_header(const AppendLogFormat& f) {
  std::array<uint8_t, kAppendLogHeaderBytes> h{};
  std::memcpy(h.data(), f.magic.data(), 8);
  store_le16(h.data() + 8, f.version);
  store_le16(h.data() + 10, f.flags);
  store_le32(h.data() + 12, f.record_size);
  for (int i = 0; i < 5; ++i) store_le64(h.data() + 16 + 8 * i, f.params[i]);
  store_le32(h.data() + 60, crc32_of(h.data(), 60));
  return h;
}

// The length of the valid block at `p` (n bytes left in the file), or 0.
size_t valid_block_at(const uint8_t* p, size_t n, uint32_t record_size) {
  if (n < kAppendLogBlockHeaderBytes) return 0;
  if (load_le32(p) != kBlockMagic) return 0;
  if (crc32_of(p, 12) != load_le32(p + 12)) return 0;
  uint64_t count = load_le32(p + 4);
  uint64_t payload = count * record_size;
  if (count == 0 || payload > n - kAppendLogBlockHeaderBytes) return 0;
  if (crc32_of(p + kAppendLogBlockHeaderBytes, payload) != load_le32(p + 8)) return 0;
  return kAppendLogBlockHeaderBytes + payload;
}

// A read-only mapping of a whole file, unmapped on scope exit.
struct Mapping {
  const uint8_t* data = nullptr;
  size_t size = 0;
  Mapping(int fd, size_t n) : size(n) {
    if (n == 0) return;
    void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return;
    ::madvise(p, n, MADV_SEQUENTIAL);
    data = static_cast<const uint8_t*>(p);
  }
  ~Mapping() {
    if (data) ::munmap(const_cast<uint8_t*>(data), size);
  }
};

}  // namespace

void store_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

void AppendLog::fail(const char* operation) const {
  throw DataError(DataErrorKind::kOutput, std::string("[") + format_.what + "][" + operation +
                                              "] " + options_.path + ": " + std::strerror(errno));
}

AppendLog::AppendLog(const WalOptions& options, const AppendLogFormat& format,
                     const RecordSink& sink)
    : options_(options), format_(format) {
  // A checkpoint taken before anything was committed may record 0: header only.
  if (options_.resume_position == uint64_t{0}) options_.resume_position = kAppendLogHeaderBytes;
  if (format_.record_size == 0 || format_.record_size > kMaxBlockPayload) {
    throw DataError(DataErrorKind::kUsage, std::string(format_.what) + ": bad record size");
  }
  if (!std::filesystem::exists(options_.path)) {
    if (options_.resume_position && *options_.resume_position > kAppendLogHeaderBytes) {
      throw DataError(DataErrorKind::kStateCorrupt,
                      std::string("[") + format_.what + "] " + options_.path +
                          " is missing but the checkpoint says " +
                          std::to_string(*options_.resume_position) + " bytes were committed");
    }
    create();
  }
  fd_ = ::open(options_.path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) fail("open");
  // One writer per log: a second process appending would interleave blocks.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int saved = errno;
    ::close(fd_);
    fd_ = -1;
    errno = saved;
    if (saved == EWOULDBLOCK) {
      throw DataError(DataErrorKind::kUsage, std::string("[") + format_.what + "] " +
                                                 options_.path +
                                                 " is open for writing by another process");
    }
    fail("flock");
  }
  try {
    replay(sink);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

AppendLog::~AppendLog() {
  if (fd_ >= 0) ::close(fd_);  // pending records are not committed: dropped by design
}

void AppendLog::create() {
  std::string tmp = options_.path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create");
  auto header = encode_header(format_);
  ssize_t n = ::write(fd, header.data(), header.size());
  bool ok = n == static_cast<ssize_t>(header.size()) && ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (!ok) {
    ::unlink(tmp.c_str());
    fail("write header");
  }
  if (::rename(tmp.c_str(), options_.path.c_str()) != 0) fail("rename");
  auto parent = std::filesystem::path(options_.path).parent_path();
  int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void AppendLog::replay(const RecordSink& sink) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("stat");
  const size_t size = static_cast<size_t>(st.st_size);
  Mapping map(fd_, size);
  if (size > 0 && !map.data) fail("mmap");
  const uint8_t* base = map.data;
  auto corrupt = [&](const std::string& why) {
    return DataError(DataErrorKind::kStateCorrupt,
                     std::string("[") + format_.what + "] " + options_.path + ": " + why);
  };
  if (size < kAppendLogHeaderBytes) throw corrupt("shorter than its header");
  if (crc32_of(base, 60) != load_le32(base + 60)) throw corrupt("header CRC mismatch");
  AppendLogFormat found = format_;
  std::memcpy(found.magic.data(), base, 8);
  found.version = load_le16(base + 8);
  found.flags = load_le16(base + 10);
  found.record_size = load_le32(base + 12);
  for (int i = 0; i < 5; ++i) found.params[i] = load_le64(base + 16 + 8 * i);
  if (found.magic != format_.magic) throw corrupt("not a " + std::string(format_.what));
  if (found.version != format_.version) {
    throw corrupt("version " + std::to_string(found.version) + ", this build reads " +
                  std::to_string(format_.version));
  }
  if (found.flags != format_.flags || found.record_size != format_.record_size ||
      found.params != format_.params) {
    throw DataError(DataErrorKind::kUsage,
                    std::string("[") + format_.what + "] " + options_.path +
                        " was written with other options (key mode, match tracking or "
                        "MinHash parameters); open it with the same ones or use a new path");
  }

  const size_t limit =
      options_.resume_position ? std::min<size_t>(*options_.resume_position, size) : size;
  if (options_.resume_position && *options_.resume_position > size) {
    throw corrupt("the checkpoint says " + std::to_string(*options_.resume_position) +
                  " bytes were committed but the file has " + std::to_string(size));
  }
  size_t pos = kAppendLogHeaderBytes;
  while (pos < limit) {
    size_t len = valid_block_at(base + pos, limit - pos, format_.record_size);
    if (len == 0) break;
    sink(base + pos + kAppendLogBlockHeaderBytes, load_le32(base + pos + 4));
    stats_.blocks += 1;
    stats_.records += load_le32(base + pos + 4);
    pos += len;
  }
  if (options_.resume_position) {
    if (pos != limit || limit < kAppendLogHeaderBytes) {
      throw corrupt("the checkpoint's position " + std::to_string(*options_.resume_position) +
                    " is not the end of a valid block (valid blocks end at " +
                    std::to_string(pos) + ")");
    }
  } else if (pos < size) {
    // Is the bad block the torn tail, or is committed data damaged?
    for (size_t q = pos + 1; q + kAppendLogBlockHeaderBytes <= size; ++q) {
      if (load_le32(base + q) == kBlockMagic &&
          valid_block_at(base + q, size - q, format_.record_size) != 0) {
        throw corrupt("block at byte " + std::to_string(pos) +
                      " is damaged but a valid block follows at byte " + std::to_string(q) +
                      "; refusing to drop committed records");
      }
    }
  }
  stats_.valid_bytes = pos;
  stats_.cut_bytes = size - pos;
  if (pos < size) {
    if (::ftruncate(fd_, static_cast<off_t>(pos)) != 0) fail("ftruncate");
    if (::fdatasync(fd_) != 0) fail("fdatasync");
  }
  position_ = committed_ = pos;
}

void AppendLog::append(const void* records, size_t count) {
  const auto* p = static_cast<const uint8_t*>(records);
  pending_.insert(pending_.end(), p, p + count * format_.record_size);
}

void AppendLog::write_block(const uint8_t* payload, size_t count) {
  const size_t payload_bytes = count * format_.record_size;
  std::vector<uint8_t> block(kAppendLogBlockHeaderBytes + payload_bytes);
  store_le32(block.data(), kBlockMagic);
  store_le32(block.data() + 4, static_cast<uint32_t>(count));
  store_le32(block.data() + 8, crc32_of(payload, payload_bytes));
  store_le32(block.data() + 12, crc32_of(block.data(), 12));
  std::memcpy(block.data() + kAppendLogBlockHeaderBytes, payload, payload_bytes);

  size_t done = 0;
  auto write_until = [&](size_t end) {
    while (done < end) {
      ssize_t n = ::pwrite(fd_, block.data() + done, end - done,
                           static_cast<off_t>(position_ + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        int saved = errno;
        // Never leave half a block behind a live writer.
        [[maybe_unused]] int ignored = ::ftruncate(fd_, static_cast<off_t>(position_));
        errno = saved;
        fail("write");
      }
      done += static_cast<size_t>(n);
    }
  };
  if (options_.split_write_pause_us_for_tests > 0) {
    write_until(block.size() / 2);
    std::this_thread::sleep_for(std::chrono::microseconds(options_.split_write_pause_us_for_tests));
  }
  write_until(block.size());
  position_ += block.size();
}

void AppendLog::flush() {
  const size_t per_block = std::max<size_t>(1, kMaxBlockPayload / format_.record_size);
  const size_t total = pending_records();
  size_t first = 0;
  try {
    for (; first < total; first += per_block) {
      write_block(pending_.data() + first * format_.record_size,
                  std::min(per_block, total - first));
    }
  } catch (...) {
    // Blocks already written stay written; the rest stays pending for a retry.
    pending_.erase(pending_.begin(), pending_.begin() + first * format_.record_size);
    throw;
  }
  pending_.clear();
}

void AppendLog::commit() {
  flush();
  if (options_.sync == WalSync::kFdatasync && position_ != committed_) {
    if (::fdatasync(fd_) != 0) fail("fdatasync");
  }
  committed_ = position_;
}

}  // namespace luminamoon
