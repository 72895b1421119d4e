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

namespace detail {
// Note [output block cache]: a stage's output of a large batch is a fresh
// allocation of tens or hundreds of MB, which the C library maps anew on
// every call; the kernel then faults in and zeroes every page on first touch
// (a profile of the batch stages put that at about 10% of the chain's time,
// and a cold call of the cleaner at under a third of its warm speed). Blocks
// of at least kCachedBlockBytes are therefore kept when their batch dies and
// handed to the next output of a fitting size (at most twice the request),
// like torch's caching allocator: at most LUMINAMOON_OUTPUT_CACHE_MB
// (default 512, 0 = off) of idle blocks, the oldest freed first.
inline constexpr size_t kCachedBlockBytes = size_t(8) << 20;
void* acquire_output_block(size_t bytes);  // never nullptr (throws std::bad_alloc)
void release_output_block(void* data);     // a block from acquire_output_block
}  // namespace detail

// std::allocator whose resize() leaves new bytes uninitialized: a stage
// sizes its output and then fills it in parallel, and a zero-fill first would
// be a sequential pass of its own (and would take all the page faults on one
// thread). Large blocks come from the output block cache.
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
  T* allocate(size_t n) {
    if (n * sizeof(T) >= detail::kCachedBlockBytes) return static_cast<T*>(detail::acquire_output_block(n * sizeof(T)));
    return std::allocator<T>::allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= detail::kCachedBlockBytes) {
      detail::release_output_block(p);
    } else {
      std::allocator<T>::deallocate(p, n);
    }
  }
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
