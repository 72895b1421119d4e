// HashKeySet: an open-addressing set of 64-bit hash keys stored as themselves
// (8 bytes a slot), with an optional parallel array of 64-bit refs.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

namespace luminamoon {

// Note [HashKeySet layout]
// The keys are XXH3-64 values, already uniform, so the home slot is the key
// scaled onto the table (Lemire's multiply-shift "fastrange") and no further
// hashing is needed. Linear probing; 0 marks an empty slot and the key 0 is
// held in a side flag. The table grows by 1.5x when more than 80% full, so
// between growths the load stays in (0.533, 0.8]: 8 / load <= 15 bytes per key
// once the 128-byte minimum table holds 8 keys (a power-of-two table would dip
// to load 0.4 = 20 bytes). Growing allocates the new table before freeing the
// old one, so the transient peak during a growth is 2.5x the old table; a
// caller that knows the count passes `expected` and never grows.
class HashKeySet {
 public:
  static constexpr size_t kMinCapacity = 16;

  explicit HashKeySet(bool with_refs, size_t expected = 0) : with_refs_(with_refs) {
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
    if (with_refs_) refs_[i] = ref;
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
  uint64_t memory_bytes() const { return key_bytes() * (with_refs_ ? 2 : 1); }

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
    keys_.assign(capacity, 0);
    if (with_refs_) refs_.assign(capacity, 0);
  }

  void grow() {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<int64_t> old_refs = std::move(refs_);
    const size_t old_capacity = capacity_;
    keys_ = {};
    refs_ = {};
    allocate(old_capacity + old_capacity / 2);
    for (size_t j = 0; j < old_capacity; ++j) {
      uint64_t key = old_keys[j];
      if (key == 0) continue;
      size_t i = home(key, capacity_);
      while (keys_[i] != 0) i = i + 1 == capacity_ ? 0 : i + 1;
      keys_[i] = key;
      if (with_refs_) refs_[i] = old_refs[j];
    }
  }

  bool with_refs_;
  size_t capacity_ = 0;
  size_t size_ = 0;  // includes the zero key
  std::vector<uint64_t> keys_;
  std::vector<int64_t> refs_;
  bool has_zero_ = false;
  int64_t zero_ref_ = 0;
};

}  // namespace luminamoon
