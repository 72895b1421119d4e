// HashKeySet: an open-addressing set of 64-bit hash keys stored as themselves
// (8 bytes a slot), with an optional parallel array of 64-bit refs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

namespace luminamoon {

// Note [HashKeySet layout]
// The keys are XXH3-64 values, already uniform, so the home slot is the key
// scaled onto the table (Lemire's multiply-shift "fastrange") and no further
// hashing is needed. Linear probing; 0 marks an empty slot and the key 0 is
// held in a side flag. The table grows by 1.5x when more than 80% full, so
// between growths the load stays in (0.533, 0.8]: 8 / load <= 15 bytes per key
// once the 128-byte minimum table holds 8 keys (a power-of-two table would dip
// to load 0.4 = 20 bytes). A growth extends the arrays in place (realloc,
// which glibc serves with mremap for large blocks: no copy, no second table)
// and rehashes in place, so even the peak stays 12 / 0.8 = 15 bytes per key
// plus a 1-bit-per-slot scratch bitmap. A caller that knows the count passes
// `expected` and never grows.
//
// Note [in-place rehash]
// After extending to C' slots, every old slot i in order: a key not yet
// marked "placed" is picked up (slot emptied) and inserted from its new home,
// skipping occupied placed slots; it takes the first slot that is empty or
// holds an unplaced key, and an unplaced key found there is picked up in turn
// and inserted the same way. Placed keys never move again, and every slot
// between a placed key's home and its slot is occupied by placed keys, which
// is the linear-probing invariant once all keys are placed. Each step places
// one key, so the work is bounded by the number of keys times the probe length.

// A zero-filled array grown with realloc.
template <class T>
class ReallocArray {
 public:
  ReallocArray() = default;
  ~ReallocArray() { std::free(data_); }
  ReallocArray(ReallocArray&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ReallocArray& operator=(ReallocArray&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  void resize_zeroed(size_t n) {
    void* p = std::realloc(data_, std::max<size_t>(n, 1) * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
    if (n > size_) std::memset(data_ + size_, 0, (n - size_) * sizeof(T));
    size_ = n;
  }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Ref: how a ref is stored (the interface takes and gives int64_t): the LSH
// band tables store 32-bit document ids, 12 instead of 16 bytes a slot.
template <class Ref>
class BasicHashKeySet {
 public:
  static constexpr size_t kMinCapacity = 16;

  explicit BasicHashKeySet(bool with_refs, size_t expected = 0) : with_refs_(with_refs) {
    // Sized so that `expected` keys fit without a growth (no 2.5x transient).
    allocate(std::max(kMinCapacity, expected + expected / 4 + 1));
  }

  // Inserts `key` with `ref`. Returns true when new; when already present
  // returns false and sets *first_ref to the ref stored with it (0 without refs).
  bool insert(uint64_t key, int64_t ref, int64_t* first_ref) {
    if (key == 0) {
      if (has_zero_) {
        *first_ref = zero_ref_;
        return false;
      }
      has_zero_ = true;
      zero_ref_ = with_refs_ ? ref : 0;
      ++size_;
      return true;
    }
    size_t i = home(key, capacity_);
    while (keys_[i] != 0) {
      if (keys_[i] == key) {
        *first_ref = with_refs_ ? refs_[i] : 0;
        return false;
      }
      i = i + 1 == capacity_ ? 0 : i + 1;
    }
    keys_[i] = key;
    if (with_refs_) refs_[i] = static_cast<Ref>(ref);
    ++size_;
    if (size_ * 5 > capacity_ * 4) grow();
    return true;
  }

  bool contains(uint64_t key) const {
    int64_t ignored;
    return find(key, &ignored);
  }

  // True when present, with its ref in *ref (0 without refs).
  bool find(uint64_t key, int64_t* ref) const {
    if (key == 0) {
      *ref = zero_ref_;
      return has_zero_;
    }
    for (size_t i = home(key, capacity_); keys_[i] != 0; i = i + 1 == capacity_ ? 0 : i + 1) {
      if (keys_[i] == key) {
        *ref = with_refs_ ? refs_[i] : 0;
        return true;
      }
    }
    return false;
  }

  // Hints the cache line that insert(key) will probe first.
  void prefetch(uint64_t key) const { __builtin_prefetch(&keys_[home(key, capacity_)]); }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  uint64_t key_bytes() const { return uint64_t{capacity_} * sizeof(uint64_t); }
  uint64_t memory_bytes() const { return key_bytes() + (with_refs_ ? uint64_t{capacity_} * sizeof(Ref) : 0); }

  template <class F>
  void for_each(F&& f) const {
    if (has_zero_) f(uint64_t{0}, zero_ref_);
    for (size_t i = 0; i < capacity_; ++i) {
      if (keys_[i] != 0) f(keys_[i], with_refs_ ? refs_[i] : 0);
    }
  }

 private:
  static size_t home(uint64_t key, size_t capacity) {
    return static_cast<size_t>((static_cast<unsigned __int128>(key) * capacity) >> 64);
  }

  void allocate(size_t capacity) {
    capacity_ = capacity;
    keys_.resize_zeroed(capacity);
    if (with_refs_) refs_.resize_zeroed(capacity);
  }

  void grow() {  // Note [in-place rehash]
    const size_t old_capacity = capacity_;
    allocate(old_capacity + old_capacity / 2);
    std::vector<uint64_t> placed((capacity_ + 63) / 64, 0);
    auto is_placed = [&](size_t j) { return (placed[j >> 6] >> (j & 63)) & 1; };
    for (size_t i = 0; i < old_capacity; ++i) {
      if (keys_[i] == 0 || is_placed(i)) continue;
      uint64_t key = keys_[i];
      Ref ref = with_refs_ ? refs_[i] : 0;
      keys_[i] = 0;
      while (key != 0) {
        size_t j = home(key, capacity_);
        while (keys_[j] != 0 && is_placed(j)) j = j + 1 == capacity_ ? 0 : j + 1;
        std::swap(key, keys_[j]);
        if (with_refs_) std::swap(ref, refs_[j]);
        placed[j >> 6] |= uint64_t{1} << (j & 63);
      }
    }
  }

  bool with_refs_;
  size_t capacity_ = 0;
  size_t size_ = 0;  // includes the zero key
  ReallocArray<uint64_t> keys_;
  ReallocArray<Ref> refs_;
  bool has_zero_ = false;
  int64_t zero_ref_ = 0;
};

using HashKeySet = BasicHashKeySet<int64_t>;

}  // namespace luminamoon
