// Fuzz target: the JSONL reader over plain, gzip and zstd shards (the input
// compressed by us, or handed raw to the decompressor), with the
// resume-position property of shard_reader_property.h.
#include <zlib.h>
#include <zstd.h>

#include "fuzz/shard_reader_property.h"

namespace {

std::string gzip(std::string_view s) {
  z_stream z{};
  deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, s.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zstd(std::string_view s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 1));
  return out;
}

}  // namespace

// settings: bits 0-1 compression (none, gz, zst, raw bytes as .gz/.zst by
// bit 2), bits 3-4 batch size, bits 5-7 max_record_bytes (small limits reach
// the over-long line path).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lumina_fuzz::Input in(data, size);
  std::string bytes;
  std::string name = "shard.jsonl";
  switch (in.settings & 3) {
    case 0: bytes = in.rest; break;
    case 1: bytes = gzip(in.rest); name += ".gz"; break;
    case 2: bytes = zstd(in.rest); name += ".zst"; break;
    case 3: bytes = in.rest; name += (in.settings & 4) ? ".zst" : ".gz"; break;
  }
  luminamoon::ReaderOptions options;
  options.batch_docs = size_t{1} << ((in.settings >> 3) & 3);  // 1, 2, 4, 8
  const unsigned limit = in.settings >> 5;
  // 32 B .. 128 KiB, else 1 MiB (the 64 MiB default costs a 4 MiB buffer per reader)
  options.max_record_bytes = limit != 0 ? size_t{8} << (2 * limit) : size_t{1} << 20;
  const std::string path = lumina_fuzz::write_scratch(name, bytes);
  lumina_fuzz::check_shard_reader(luminamoon::describe_shard(path, 0), options, /*check_utf8=*/true);
  return 0;
}
