// The gzip ByteSources (Note [gzip decoders] in gzip_source.h).
#include "data/reader/gzip_source.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#ifdef LUMINA_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

constexpr size_t kInputChunk = size_t{1} << 17;

// What both decoders share: the compressed input, the member bookkeeping of
// concatenated members and the deferred error (the bytes decoded before
// damage are handed out first). Decoder::inflate_some decodes from input_
// into [out, out + n) and says how far it got.
template <class Decoder>
class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(const std::string& path) : file_(path), input_(kInputChunk) {}

  size_t read(char* out, size_t n) override {
    if (!deferred_error_.empty()) throw DataError(DataErrorKind::kInput, deferred_error_);
    if (done_) return 0;
    n = std::min<size_t>(n, UINT_MAX);  // both decoders count output in 32 bits
    size_t produced = 0;
    while (produced == 0) {
      if (decoder_.input_left() == 0) {
        const size_t got = file_.read(input_.data(), input_.size());
        if (got == 0) {
          if (!at_member_start_) {
            throw DataError(DataErrorKind::kInput, "[gzip] " + file_.path() + ": truncated stream");
          }
          done_ = true;
          break;
        }
        decoder_.set_input(input_.data(), got);
      }
      at_member_start_ = false;
      std::string error;
      bool member_end = false;
      const size_t input_before = decoder_.input_left();
      const size_t got = decoder_.inflate_some(out + produced, n - produced, member_end, error);
      produced += got;
      if (error.empty() && got == 0 && !member_end && decoder_.input_left() == input_before) {
        error = "the decoder made no progress";  // never spin on input a decoder will not take
      }
      if (!error.empty()) {
        std::string message = "[gzip] " + file_.path() + ": " + error;
        if (produced > 0) {
          deferred_error_ = std::move(message);
          break;
        }
        throw DataError(DataErrorKind::kInput, message);
      }
      if (member_end) {  // concatenated members (as `cat a.gz b.gz` makes) continue the stream
        decoder_.next_member();
        at_member_start_ = true;
      }
    }
    return produced;
  }
  void skip_to(uint64_t offset) override { discard_to(*this, offset); }

 private:
  ShardFile file_;
  std::vector<char> input_;
  Decoder decoder_;
  bool at_member_start_ = true;
  bool done_ = false;
  std::string deferred_error_;
};

class ZlibDecoder {
 public:
  ZlibDecoder() {
    std::memset(&z_, 0, sizeof z_);
    // 15 + 32: detect the gzip or zlib header automatically.
    if (inflateInit2(&z_, 15 + 32) != Z_OK) throw DataError(DataErrorKind::kInput, "[gzip] inflateInit2 failed");
  }
  ~ZlibDecoder() { inflateEnd(&z_); }
  ZlibDecoder(const ZlibDecoder&) = delete;
  ZlibDecoder& operator=(const ZlibDecoder&) = delete;

  size_t input_left() const { return z_.avail_in; }
  void set_input(char* in, size_t n) {
    z_.next_in = reinterpret_cast<Bytef*>(in);
    z_.avail_in = static_cast<uInt>(n);
  }
  size_t inflate_some(char* out, size_t n, bool& member_end, std::string& error) {
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    const int rc = inflate(&z_, Z_NO_FLUSH);
    member_end = rc == Z_STREAM_END;
    if (rc != Z_OK && rc != Z_BUF_ERROR && rc != Z_STREAM_END) error = z_.msg ? z_.msg : "corrupt stream";
    return n - z_.avail_out;
  }
  void next_member() { inflateReset(&z_); }

 private:
  z_stream z_;
};

#ifdef LUMINA_HAVE_ISAL
class IsalDecoder {
 public:
  IsalDecoder() : state_(std::make_unique<inflate_state>()) { start(); }

  size_t input_left() const { return state_->avail_in; }
  void set_input(char* in, size_t n) {
    state_->next_in = reinterpret_cast<uint8_t*>(in);
    state_->avail_in = static_cast<uint32_t>(n);
  }
  size_t inflate_some(char* out, size_t n, bool& member_end, std::string& error) {
    state_->next_out = reinterpret_cast<uint8_t*>(out);
    state_->avail_out = static_cast<uint32_t>(n);
    const int rc = isal_inflate(state_.get());
    member_end = rc >= 0 && state_->block_state == ISAL_BLOCK_FINISH;
    if (rc < 0) error = message(rc);
    return n - state_->avail_out;
  }
  // The next member starts at the first byte the finished one did not use.
  void next_member() {
    uint8_t* in = state_->next_in;
    const uint32_t left = state_->avail_in;
    start();
    state_->next_in = in;
    state_->avail_in = left;
  }

 private:
  void start() {
    isal_inflate_init(state_.get());
    state_->crc_flag = ISAL_GZIP;  // parse the gzip header, verify CRC-32 and length
  }
  static std::string message(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK: return "invalid deflate block";
      case ISAL_INVALID_SYMBOL: return "invalid deflate symbol";
      case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
      case ISAL_INVALID_WRAPPER: return "incorrect header check";
      case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
      case ISAL_INCORRECT_CHECKSUM: return "incorrect data check";
      default: return "corrupt stream (isa-l error " + std::to_string(rc) + ")";
    }
  }

  std::unique_ptr<inflate_state> state_;  // ~200 KB: on the heap
};

bool starts_with_gzip_magic(const std::string& path) {
  ShardFile file(path);
  unsigned char magic[2] = {0, 0};
  size_t got = 0;
  while (got < 2) {
    const size_t n = file.read(reinterpret_cast<char*>(magic) + got, 2 - got);
    if (n == 0) break;
    got += n;
  }
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}
#endif

}  // namespace

std::unique_ptr<ByteSource> open_gzip_with_zlib(const std::string& path) {
  return std::make_unique<GzipSource<ZlibDecoder>>(path);
}

std::unique_ptr<ByteSource> open_gzip_with_isal(const std::string& path) {
#ifdef LUMINA_HAVE_ISAL
  return std::make_unique<GzipSource<IsalDecoder>>(path);
#else
  (void)path;
  return nullptr;
#endif
}

const char* gzip_decoder_name() {
#ifdef LUMINA_HAVE_ISAL
  return "isa-l";
#else
  return "zlib";
#endif
}

std::unique_ptr<ByteSource> open_gzip(const std::string& path) {
#ifdef LUMINA_HAVE_ISAL
  if (starts_with_gzip_magic(path)) return open_gzip_with_isal(path);
#endif
  return open_gzip_with_zlib(path);
}

}  // namespace luminamoon
