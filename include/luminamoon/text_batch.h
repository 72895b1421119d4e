// TextBatchView: the non-owning view of a batch of UTF-8 documents that every
// data-engine stage reads (flat bytes plus int64 offsets, Arrow large_string).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace luminamoon {

struct TextBatchView {
  const uint8_t* data = nullptr;   // bytes of all documents, back to back
  const int64_t* offsets = nullptr;  // size + 1 entries, offsets[0] == 0 not required
  size_t size = 0;                 // number of documents

  std::string_view operator[](size_t i) const {
    return {reinterpret_cast<const char*>(data) + offsets[i],
            static_cast<size_t>(offsets[i + 1] - offsets[i])};
  }
  size_t total_bytes() const { return size ? static_cast<size_t>(offsets[size] - offsets[0]) : 0; }
};

}  // namespace luminamoon
