// LineReader: '\n'-separated lines of a ByteSource with their decompressed
// byte offsets, so that a checkpoint can name where the next line starts.
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

  LineReader(std::unique_ptr<ByteSource> source, uint64_t start_offset);

  // The next line without its '\n' (a final line without one counts too).
  // The view stays valid until the next call. False at the end.
  bool next(std::string_view& line);
  // Decompressed offset just past the last returned line and its '\n'.
  uint64_t offset() const { return offset_; }

 private:
  bool refill();

  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  size_t begin_ = 0;  // first unreturned byte
  size_t end_ = 0;    // one past the last valid byte
  bool eof_ = false;
  uint64_t offset_ = 0;
};

}  // namespace luminamoon
