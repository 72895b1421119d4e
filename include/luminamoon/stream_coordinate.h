// StreamCoordinate: the 32-byte little-endian position in the input stream that
// a checkpoint records (spec data-engine.md, "Checkpoint and resume").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace luminamoon {

// Note [coordinate fields]: the spec fixes the layout; what each field means
// depends on the shard's format.
//   line formats (jsonl/ndjson, txt): byte_offset is the offset in the
//     decompressed byte stream of the next unread record, row_offset_in_page
//     the number of lines consumed in the shard (so line numbers in error
//     reports stay right after a resume); row_group_idx and page_idx are 0.
//   parquet: row_group_idx is the next row group, row_offset_in_page the rows
//     already consumed inside it; byte_offset and page_idx are 0.
//   global_row_idx counts every record consumed before this point, all shards.
struct StreamCoordinate {
  uint32_t shard_id = 0;
  uint64_t byte_offset = 0;
  uint32_t row_group_idx = 0;
  uint32_t page_idx = 0;
  uint32_t row_offset_in_page = 0;
  uint64_t global_row_idx = 0;

  static constexpr size_t kEncodedSize = 32;

  void encode(uint8_t* out) const {
    put(out + 0, shard_id);
    put(out + 4, byte_offset);
    put(out + 12, row_group_idx);
    put(out + 16, page_idx);
    put(out + 20, row_offset_in_page);
    put(out + 24, global_row_idx);
  }
  static StreamCoordinate decode(const uint8_t* in) {
    StreamCoordinate c;
    c.shard_id = get<uint32_t>(in + 0);
    c.byte_offset = get<uint64_t>(in + 4);
    c.row_group_idx = get<uint32_t>(in + 12);
    c.page_idx = get<uint32_t>(in + 16);
    c.row_offset_in_page = get<uint32_t>(in + 20);
    c.global_row_idx = get<uint64_t>(in + 24);
    return c;
  }
  friend bool operator==(const StreamCoordinate&, const StreamCoordinate&) = default;

  // Little-endian without relying on the host's byte order.
  template <class T>
  static void put(uint8_t* p, T v) {
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
  template <class T>
  static T get(const uint8_t* p) {
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
    return v;
  }
};

}  // namespace luminamoon
