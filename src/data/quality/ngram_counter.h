// NgramCounter: counts of 64-bit n-gram hashes in an open-addressing table
// reused across documents (the hash is already uniform, so it is its own slot).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace luminamoon::detail {

class NgramCounter {
 public:
  // Empties the table, sized for up to `expected` distinct keys.
  void reset(size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap <<= 1;
    keys_.assign(cap, 0);
    counts_.assign(cap, 0);
    mask_ = cap - 1;
  }
  // Adds one occurrence; returns the slot.
  size_t add(uint64_t key) {
    key = key ? key : 1;  // 0 marks an empty slot
    size_t s = static_cast<size_t>(key) & mask_;
    while (keys_[s] != 0 && keys_[s] != key) s = (s + 1) & mask_;
    keys_[s] = key;
    ++counts_[s];
    return s;
  }
  uint32_t count_at(size_t slot) const { return counts_[slot]; }
  uint32_t count(uint64_t key) const {
    key = key ? key : 1;
    size_t s = static_cast<size_t>(key) & mask_;
    while (keys_[s] != 0) {
      if (keys_[s] == key) return counts_[s];
      s = (s + 1) & mask_;
    }
    return 0;
  }

 private:
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> counts_;
  size_t mask_ = 0;
};

}  // namespace luminamoon::detail
