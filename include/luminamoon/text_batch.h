// TextBatchView / TextBatch: the batch of UTF-8 documents every data-engine
// stage reads and writes (flat bytes plus int64 offsets, Arrow large_string).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>
#include <utility>
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

// std::allocator whose resize() leaves new bytes uninitialized: a stage
// sizes its output and then fills it in parallel, and a zero-fill first would
// be a sequential pass of its own (and would take all the page faults on one
// thread).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() noexcept = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ByteBuffer = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

// An owning batch in the same layout; stages return one of these.
struct TextBatch {
  ByteBuffer data;
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
