// ByteSource: the decompressed bytes of one shard (plain, gzip or zstd), with
// the ability to start at a byte offset of the decompressed stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "luminamoon/reader.h"

namespace luminamoon {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n decompressed bytes; 0 at the end. A damaged stream throws
  // DataError(kInput) naming the shard and the decompressor's reason.
  virtual size_t read(char* out, size_t n) = 0;
  // Positions the stream at a decompressed offset from its start: a seek for
  // plain files, decompress-and-discard otherwise (compressed streams have no
  // random access).
  virtual void skip_to(uint64_t offset) = 0;

  static std::unique_ptr<ByteSource> open(const std::string& path, Compression compression);
};

}  // namespace luminamoon
