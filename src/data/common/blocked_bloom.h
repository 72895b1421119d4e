// BlockedBloom: a Bloom filter of 64-bit hash keys in which every key's
// probes fall into one 64-byte block (Note [blocked Bloom filter]).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace luminamoon {

// Note [blocked Bloom filter]
// The keys are XXH3 values, already uniform, so no further hashing: the
// block comes from the key's high bits (multiply-shift onto the block
// count), and the 6 probes from 9-bit fields of an odd multiple of the key,
// all inside the block's 512 bits. One cache line per lookup; at 10 bits a
// key ~1-2% false positives (a little above a classic filter's 0.8%, the
// price of one line instead of six).
class BlockedBloom {
 public:
  static constexpr uint64_t kBitsPerKey = 10;

  BlockedBloom() = default;
  // Sized for `keys` keys (at least one block).
  explicit BlockedBloom(size_t keys)
      : words_(std::max<size_t>(1, (keys * kBitsPerKey + 511) / 512) * kBlockWords, 0) {}

  void add(uint64_t key) {
    uint64_t* block = words_.data() + block_offset(key);
    for_each_probe(key, [&](unsigned bit) { block[bit >> 6] |= uint64_t{1} << (bit & 63); });
  }
  // False: the key was never added. True: it may have been.
  bool may_contain(uint64_t key) const {
    const uint64_t* block = words_.data() + block_offset(key);
    bool maybe = true;
    for_each_probe(key, [&](unsigned bit) { maybe &= (block[bit >> 6] >> (bit & 63)) & 1; });
    return maybe;
  }
  uint64_t memory_bytes() const { return words_.capacity() * sizeof(uint64_t); }

 private:
  static constexpr size_t kBlockWords = 8;  // 512 bits: one cache line
  static constexpr int kProbes = 6;

  size_t block_offset(uint64_t key) const {
    const size_t blocks = words_.size() / kBlockWords;
    return static_cast<size_t>((static_cast<unsigned __int128>(key) * blocks) >> 64) * kBlockWords;
  }
  template <class F>
  static void for_each_probe(uint64_t key, F&& f) {
    const uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < kProbes; ++i) f(static_cast<unsigned>((h >> (9 * i)) & 511));
  }

  std::vector<uint64_t> words_;
};

}  // namespace luminamoon
