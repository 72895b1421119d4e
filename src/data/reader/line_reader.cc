// LineReader: a growable buffer scanned with memchr; lines are returned as
// views into it, with kPadding readable bytes after every line.
#include "data/reader/line_reader.h"

#include <algorithm>
#include <cstring>

namespace luminamoon {

// Note [bounded lines]: the buffer grows only while the pending line is
// shorter than the limit (to at most about the limit plus one read chunk).
// Once it holds more than max_line_ bytes without a '\n', the line is over
// the limit: its buffered bytes are dropped and the rest is read through the
// same buffer and discarded up to the next '\n'. A 1 GB line (or an endless
// stream without newlines) thus costs max_line_ bytes of memory, not 3x its
// size, and reading goes on at the next line.
namespace {
constexpr size_t kReadChunk = size_t{1} << 16;
constexpr size_t kInitialBuffer = size_t{4} << 20;
}  // namespace

LineReader::LineReader(std::unique_ptr<ByteSource> source, uint64_t start_offset,
                       size_t max_line_bytes)
    : source_(std::move(source)),
      max_line_(std::max<size_t>(max_line_bytes, 1)),
      offset_(start_offset) {
  buffer_.resize(std::min(kInitialBuffer, max_line_ + kReadChunk) + kPadding);
  if (start_offset > 0) source_->skip_to(start_offset);
}

bool LineReader::refill() {
  if (eof_) return false;
  // Keep the unreturned tail, then read after it (growing for long lines).
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < kPadding + kReadChunk) {
    const size_t cap = max_line_ + 2 * kReadChunk + kPadding;  // Note [bounded lines]
    buffer_.resize(std::max(std::min(buffer_.size() * 2, cap), end_ + kPadding + kReadChunk));
  }
  size_t got = source_->read(buffer_.data() + end_, buffer_.size() - end_ - kPadding);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

LineReader::Status LineReader::skip_rest_of_line() {
  // The pending bytes (no '\n' among them) are part of the over-long line.
  uint64_t skipped = end_ - begin_;
  begin_ = end_ = 0;
  for (;;) {
    size_t got = eof_ ? 0 : source_->read(buffer_.data(), buffer_.size() - kPadding);
    if (got == 0) {
      eof_ = true;
      offset_ += skipped;
      too_long_bytes_ = skipped;
      return Status::kTooLong;
    }
    const void* nl = std::memchr(buffer_.data(), '\n', got);
    if (nl != nullptr) {
      size_t pos = static_cast<const char*>(nl) - buffer_.data();
      skipped += pos;
      offset_ += skipped + 1;
      too_long_bytes_ = skipped;
      begin_ = pos + 1;
      end_ = got;
      return Status::kTooLong;
    }
    skipped += got;
  }
}

LineReader::Status LineReader::read(std::string_view& line) {
  size_t scanned = begin_;
  for (;;) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl != nullptr) {
      size_t pos = static_cast<const char*>(nl) - buffer_.data();
      if (pos - begin_ > max_line_) {
        too_long_bytes_ = pos - begin_;
        offset_ += pos + 1 - begin_;
        begin_ = pos + 1;
        line = {};
        return Status::kTooLong;
      }
      line = std::string_view(buffer_.data() + begin_, pos - begin_);
      offset_ += pos + 1 - begin_;
      begin_ = pos + 1;
      return Status::kLine;
    }
    size_t pending = end_ - begin_;
    if (pending > max_line_) {
      line = {};
      return skip_rest_of_line();
    }
    if (!refill()) {
      if (pending == 0) return Status::kEnd;
      line = std::string_view(buffer_.data() + begin_, pending);
      std::memset(buffer_.data() + end_, 0, kPadding);
      offset_ += pending;
      begin_ = end_;
      return Status::kLine;
    }
    scanned = begin_ + pending;  // refill moved the tail to the front
  }
}

}  // namespace luminamoon
