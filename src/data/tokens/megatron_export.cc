// export_megatron: token shards -> Megatron-LM's indexed dataset (MMIDIDX v1).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "data/state/durable_io.h"
#include "luminamoon/data_error.h"
#include "luminamoon/stream_coordinate.h"
#include "luminamoon/token_shards.h"

namespace luminamoon {
namespace {

// Megatron's DType codes (megatron/core/datasets/indexed_dataset.py).
constexpr uint8_t kMegatronInt32 = 4;
constexpr uint8_t kMegatronUint16 = 8;

void pread_all(int fd, char* out, size_t n, uint64_t at, const std::string& path) {
  durable::pread_exact(fd, out, n, at, path, "read", DataErrorKind::kInput);
}

template <class T>
void append_le(std::string& out, T v) {
  char b[sizeof(T)];
  StreamCoordinate::put(reinterpret_cast<uint8_t*>(b), v);
  out.append(b, sizeof b);
}

}  // namespace

uint64_t export_megatron(const std::vector<std::string>& shard_paths, const std::string& prefix) {
  uint32_t token_bytes = 0;
  std::vector<int32_t> lengths;
  durable::PendingFile bin(prefix + ".bin");
  std::vector<char> buf(size_t{4} << 20);
  for (const auto& path : shard_paths) {
    uint32_t tb = 0;
    TokenShardInfo info = read_token_shard_header(path, &tb);
    if (token_bytes != 0 && tb != token_bytes) {
      throw DataError(DataErrorKind::kUsage, "token shards of different widths cannot share one "
                                             "Megatron dataset: " + path);
    }
    token_bytes = tb;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError(DataErrorKind::kInput, "[open] " + path + ": " + std::strerror(errno));
    try {
      // Document lengths from the offsets at the end of the shard.
      std::vector<uint64_t> offsets(info.documents + 1);
      pread_all(fd, reinterpret_cast<char*>(offsets.data()), offsets.size() * 8,
                info.bytes - offsets.size() * 8, path);
      for (uint64_t d = 0; d < info.documents; ++d) {
        uint64_t len = offsets[d + 1] - offsets[d];
        if (offsets[d + 1] < offsets[d] || len > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
          throw DataError(DataErrorKind::kInput, "token shard " + path + ": document " +
                                                     std::to_string(d) + " has a bad length");
        }
        lengths.push_back(static_cast<int32_t>(len));
      }
      // Tokens, copied as they are (both formats store little-endian ids).
      uint64_t left = info.tokens * tb, at = kTokenShardHeaderBytes;
      while (left > 0) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        pread_all(fd, buf.data(), n, at, path);
        bin.append(std::string_view(buf.data(), n));
        at += n;
        left -= n;
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  if (token_bytes == 0) token_bytes = 2;

  std::string idx = std::string("MMIDIDX\0\0", 9);
  append_le<uint64_t>(idx, 1);
  idx.push_back(static_cast<char>(token_bytes == 2 ? kMegatronUint16 : kMegatronInt32));
  append_le<uint64_t>(idx, lengths.size());      // sequences
  append_le<uint64_t>(idx, lengths.size() + 1);  // document indices
  idx.reserve(idx.size() + lengths.size() * 20 + 8);
  for (int32_t len : lengths) append_le<int32_t>(idx, len);
  uint64_t pointer = 0;
  for (int32_t len : lengths) {
    append_le<int64_t>(idx, static_cast<int64_t>(pointer));
    pointer += static_cast<uint64_t>(len) * token_bytes;
  }
  for (uint64_t d = 0; d <= lengths.size(); ++d) append_le<int64_t>(idx, static_cast<int64_t>(d));
  bin.finish();
  durable::write_file(prefix + ".idx", idx);
  return lengths.size();
}

}  // namespace luminamoon
