// ByteSource implementations: plain file (pread/lseek), gzip (zlib, multi-member)
// and zstd (streaming, multi-frame).
#include "data/reader/byte_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

class FileDescriptor {
 public:
  explicit FileDescriptor(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      throw DataError(DataErrorKind::kInput, "[open] " + path + ": " + std::strerror(errno));
    }
  }
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  size_t read(char* out, size_t n) {
    for (;;) {
      ssize_t got = ::read(fd_, out, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) {
        throw DataError(DataErrorKind::kInput, "[read] " + path_ + ": " + std::strerror(errno));
      }
    }
  }
  void seek(uint64_t offset) {
    if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
      throw DataError(DataErrorKind::kInput, "[seek] " + path_ + ": " + std::strerror(errno));
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(const std::string& path) : file_(path) {}
  size_t read(char* out, size_t n) override { return file_.read(out, n); }
  void skip_to(uint64_t offset) override { file_.seek(offset); }

 private:
  FileDescriptor file_;
};

// Shared by the compressed sources: discard decompressed bytes up to an offset.
void discard(ByteSource& source, uint64_t offset) {
  std::vector<char> scratch(1 << 16);
  while (offset > 0) {
    size_t want = offset < scratch.size() ? static_cast<size_t>(offset) : scratch.size();
    size_t got = source.read(scratch.data(), want);
    if (got == 0) break;  // the reader finds the end itself
    offset -= got;
  }
}

class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(const std::string& path) : file_(path), in_(1 << 17) {
    std::memset(&z_, 0, sizeof z_);
    // 15 + 32: detect the gzip or zlib header automatically.
    if (inflateInit2(&z_, 15 + 32) != Z_OK) {
      throw DataError(DataErrorKind::kInput, "[inflateInit] " + path);
    }
  }
  ~GzipSource() override { inflateEnd(&z_); }

  size_t read(char* out, size_t n) override {
    if (!deferred_error_.empty()) throw DataError(DataErrorKind::kInput, deferred_error_);
    if (done_) return 0;
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out == n) {
      if (z_.avail_in == 0) {
        size_t got = file_.read(in_.data(), in_.size());
        if (got == 0) {
          if (!at_member_start_) {
            throw DataError(DataErrorKind::kInput,
                            "[gzip] " + file_.path() + ": truncated stream");
          }
          done_ = true;
          break;
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      at_member_start_ = false;
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // Concatenated members (as `cat a.gz b.gz` makes) continue the stream.
        inflateReset(&z_);
        at_member_start_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        std::string message = "[gzip] " + file_.path() + ": " + (z_.msg ? z_.msg : "corrupt stream");
        // The bytes decoded before the damage are handed out first.
        if (z_.avail_out < n) {
          deferred_error_ = std::move(message);
          break;
        }
        throw DataError(DataErrorKind::kInput, message);
      }
    }
    return n - z_.avail_out;
  }
  void skip_to(uint64_t offset) override { discard(*this, offset); }

 private:
  FileDescriptor file_;
  std::vector<char> in_;
  z_stream z_;
  bool at_member_start_ = true;
  bool done_ = false;
  std::string deferred_error_;
};

class ZstdSource final : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path)
      : file_(path), in_(ZSTD_DStreamInSize()), stream_(ZSTD_createDStream()) {
    ZSTD_initDStream(stream_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(stream_); }

  size_t read(char* out, size_t n) override {
    if (!deferred_error_.empty()) throw DataError(DataErrorKind::kInput, deferred_error_);
    ZSTD_outBuffer output{out, n, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        size_t got = file_.read(in_.data(), in_.size());
        if (got == 0) {
          if (frame_open_) {
            throw DataError(DataErrorKind::kInput,
                            "[zstd] " + file_.path() + ": truncated stream");
          }
          return 0;
        }
        input_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      size_t rc = ZSTD_decompressStream(stream_, &output, &input_);
      if (ZSTD_isError(rc)) {
        std::string message = "[zstd] " + file_.path() + ": " + ZSTD_getErrorName(rc);
        if (output.pos > 0) {  // the bytes decoded before the damage first
          deferred_error_ = std::move(message);
          break;
        }
        throw DataError(DataErrorKind::kInput, message);
      }
      frame_open_ = rc != 0;
    }
    return output.pos;
  }
  void skip_to(uint64_t offset) override { discard(*this, offset); }

 private:
  FileDescriptor file_;
  std::vector<char> in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  ZSTD_DStream* stream_;
  bool frame_open_ = false;
  std::string deferred_error_;
};

}  // namespace

std::unique_ptr<ByteSource> ByteSource::open(const std::string& path, Compression compression) {
  switch (compression) {
    case Compression::kGzip:
      return std::make_unique<GzipSource>(path);
    case Compression::kZstd:
      return std::make_unique<ZstdSource>(path);
    case Compression::kNone:
      break;
  }
  return std::make_unique<PlainSource>(path);
}

}  // namespace luminamoon
