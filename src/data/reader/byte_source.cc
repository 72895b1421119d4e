// ByteSource implementations: plain file (read/lseek) and zstd (streaming,
// multi-frame); gzip is in gzip_source.cc.
#include "data/reader/byte_source.h"
#include "data/reader/gzip_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "luminamoon/data_error.h"

namespace luminamoon {

ShardFile::ShardFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw DataError(DataErrorKind::kInput, "[open] " + path + ": " + std::strerror(errno));
}

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t ShardFile::read(char* out, size_t n) {
  for (;;) {
    ssize_t got = ::read(fd_, out, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) throw DataError(DataErrorKind::kInput, "[read] " + path_ + ": " + std::strerror(errno));
  }
}

void ShardFile::seek(uint64_t offset) {
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
    throw DataError(DataErrorKind::kInput, "[seek] " + path_ + ": " + std::strerror(errno));
  }
}

void discard_to(ByteSource& source, uint64_t offset) {
  std::vector<char> scratch(1 << 16);
  while (offset > 0) {
    size_t want = offset < scratch.size() ? static_cast<size_t>(offset) : scratch.size();
    size_t got = source.read(scratch.data(), want);
    if (got == 0) break;  // the reader finds the end itself
    offset -= got;
  }
}

namespace {

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(const std::string& path) : file_(path) {}
  size_t read(char* out, size_t n) override { return file_.read(out, n); }
  void skip_to(uint64_t offset) override { file_.seek(offset); }

 private:
  ShardFile file_;
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
  void skip_to(uint64_t offset) override { discard_to(*this, offset); }

 private:
  ShardFile file_;
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
      return open_gzip(path);
    case Compression::kZstd:
      return std::make_unique<ZstdSource>(path);
    case Compression::kNone:
      break;
  }
  return std::make_unique<PlainSource>(path);
}

}  // namespace luminamoon
