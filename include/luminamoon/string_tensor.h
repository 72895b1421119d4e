// StringTensor: the data engine's immutable batch of strings in two layouts,
// flat (bytes + int64 offsets, Arrow large_string) and views (Arrow Utf8View).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "luminamoon/text_batch.h"

namespace luminamoon {

// One 16-byte string view exactly as Arrow's Utf8View/BinaryView: the length,
// then either up to 12 inline bytes (zero padded) or a 4-byte prefix, the
// data buffer index and the offset in that buffer.
struct StringViewSlot {
  int32_t length;
  uint8_t prefix[4];
  union {
    uint8_t inline_tail[8];  // bytes 4..11 when length <= 12
    struct {
      int32_t buffer_index;
      int32_t offset;
    } ref;
  };
};
static_assert(sizeof(StringViewSlot) == 16, "Arrow view slots are 16 bytes");
inline constexpr int32_t kStringViewInlineMax = 12;

// Three-way comparison of two views' strings, deciding on the 4-byte prefix
// when it differs (the common case) before touching the data buffers.
int compare_string_views(const StringViewSlot& a, const StringViewSlot& b,
                         const uint8_t* const* buffers);

class StringTensor {
 public:
  StringTensor();  // empty
  // Takes ownership of a batch (no copy).
  explicit StringTensor(TextBatch&& batch);
  // Borrows flat memory kept alive by `owner` (an imported Arrow array, a
  // Python object, ...). offsets has size + 1 entries; offsets[0] may be > 0.
  StringTensor(std::shared_ptr<const void> owner, const uint8_t* data, const int64_t* offsets,
               size_t size);

  size_t size() const { return size_; }
  std::string_view operator[](size_t i) const { return view()[i]; }
  TextBatchView view() const { return {data_, offsets_, size_}; }
  const uint8_t* data() const { return data_; }
  const int64_t* offsets() const { return offsets_; }
  size_t total_bytes() const { return view().total_bytes(); }
  // Keeps the memory of data()/offsets()/views alive for exporters.
  std::shared_ptr<const void> keep_alive() const { return owner_; }

  // The views layout, built on first use (thread-safe) and cached. Long
  // strings point into the flat bytes themselves: buffer k starts at
  // view_buffers()[k] (a new buffer starts whenever a 32-bit offset would overflow).
  const std::vector<StringViewSlot>& views() const;
  const std::vector<const uint8_t*>& view_buffers() const;
  const std::vector<int64_t>& view_buffer_sizes() const;
  int compare(size_t i, size_t j) const;  // through the views, prefix first

  // uint32 offsets rebased to 0, for GPU upload; throws std::length_error
  // when the bytes do not fit (>= 4 GiB).
  std::vector<uint32_t> offsets_u32() const;

 private:
  struct Views;
  const Views& views_state() const;
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  const int64_t* offsets_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<Views> views_;  // shared, lazily filled
};

}  // namespace luminamoon
