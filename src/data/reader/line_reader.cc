// LineReader: a growable buffer scanned with memchr; lines are returned as
// views into it, with kPadding readable bytes after every line.
#include "data/reader/line_reader.h"

#include <cstring>

namespace luminamoon {

LineReader::LineReader(std::unique_ptr<ByteSource> source, uint64_t start_offset)
    : source_(std::move(source)), buffer_((4u << 20) + kPadding), offset_(start_offset) {
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
  if (buffer_.size() - end_ < kPadding + (1u << 16)) buffer_.resize(buffer_.size() * 2);
  size_t got = source_->read(buffer_.data() + end_, buffer_.size() - end_ - kPadding);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = begin_;
  for (;;) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl != nullptr) {
      size_t pos = static_cast<const char*>(nl) - buffer_.data();
      line = std::string_view(buffer_.data() + begin_, pos - begin_);
      offset_ += pos + 1 - begin_;
      begin_ = pos + 1;
      return true;
    }
    size_t pending = end_ - begin_;
    if (!refill()) {
      if (pending == 0) return false;
      line = std::string_view(buffer_.data() + begin_, pending);
      std::memset(buffer_.data() + end_, 0, kPadding);
      offset_ += pending;
      begin_ = end_;
      return true;
    }
    scanned = begin_ + pending;  // refill moved the tail to the front
  }
}

}  // namespace luminamoon
