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

// A shard's file (compressed or not), read in order; errors name the path.
class ShardFile {
 public:
  explicit ShardFile(const std::string& path);
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  size_t read(char* out, size_t n);  // 0 at the end
  void seek(uint64_t offset);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// For the compressed sources' skip_to: decompresses and discards up to a
// decompressed offset (or the end).
void discard_to(ByteSource& source, uint64_t offset);

}  // namespace luminamoon
