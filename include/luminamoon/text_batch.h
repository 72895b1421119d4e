// TextBatchView / TextBatch: the batch of UTF-8 documents every data-engine
// stage reads and writes (flat bytes plus int64 offsets, Arrow large_string).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

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

// An owning batch in the same layout; stages return one of these.
struct TextBatch {
  std::vector<uint8_t> data;
  std::vector<int64_t> offsets{0};  // always size() + 1 entries, offsets[0] == 0

  size_t size() const { return offsets.size() - 1; }
  TextBatchView view() const { return {data.data(), offsets.data(), size()}; }
  std::string_view operator[](size_t i) const { return view()[i]; }
  void push_back(std::string_view s) {
    data.insert(data.end(), s.begin(), s.end());
    offsets.push_back(static_cast<int64_t>(data.size()));
  }
};

}  // namespace luminamoon
