// LineReader: '\n'-separated lines of a ByteSource with their decompressed
// byte offsets, so that a checkpoint can name where the next line starts.
// A line longer than the limit is skipped without being buffered (Note
// [bounded lines]), so memory stays bounded on any input.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "data/reader/byte_source.h"

namespace luminamoon {

class LineReader {
 public:
  // Bytes always readable after a returned line (simdjson reads ahead).
  static constexpr size_t kPadding = 64;

  enum class Status { kLine, kTooLong, kEnd };

  // max_line_bytes: the longest line returned (its '\n' not counted).
  LineReader(std::unique_ptr<ByteSource> source, uint64_t start_offset,
             size_t max_line_bytes = kUnlimited);

  // The next line without its '\n' (a final line without one counts too).
  // The view stays valid until the next call. kTooLong: a line over the limit
  // was consumed up to and including its '\n' (`line` is empty, too_long_bytes()
  // says how long it was); kEnd at the end.
  Status read(std::string_view& line);
  // read() for callers that treat an over-long line as the end of the input.
  bool next(std::string_view& line) { return read(line) == Status::kLine; }
  // Decompressed offset just past the last returned line and its '\n'.
  uint64_t offset() const { return offset_; }
  uint64_t too_long_bytes() const { return too_long_bytes_; }
  size_t max_line_bytes() const { return max_line_; }

  static constexpr size_t kUnlimited = ~size_t{0} >> 2;

 private:
  bool refill();
  Status skip_rest_of_line();

  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  size_t max_line_;
  size_t begin_ = 0;  // first unreturned byte
  size_t end_ = 0;    // one past the last valid byte
  bool eof_ = false;
  uint64_t offset_ = 0;
  uint64_t too_long_bytes_ = 0;
};

}  // namespace luminamoon
