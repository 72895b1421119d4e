// The dedup normalization's block loop (Note [normalization by compaction]
// in normalize_kernel.cc), included once per Highway target inside its
// namespace (and once in the build without Highway): no include guard.

// The rest of a block once classified: multi-byte separators, the kept
// bytes, the word starts (WriteStarts: the target's) and the compaction
// (Compact: the target's).
template <class WriteStarts, class Compact>
inline void FinishBlock(const uint8_t* p, size_t n, size_t base, uint8_t* spaced, uint64_t sep, uint64_t lead,
                        uint64_t& carry, uint64_t& prev_word, uint8_t*& w, const uint8_t* out, uint32_t*& starts,
                        WriteStarts write_starts, Compact compact) {
  const size_t len = std::min<size_t>(64, n - base);
  const uint64_t valid = len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
  sep |= carry;
  carry = 0;
  for (uint64_t m = lead & valid; m; m &= m - 1) {  // rare
    const size_t i = static_cast<size_t>(std::countr_zero(m));
    const size_t k = multibyte_separator_length(p + base + i, n - base - i);
    if (k == 0) continue;
    spaced[i] = ' ';
    for (size_t t = i; t < i + k; ++t) {
      if (t < 64) sep |= uint64_t{1} << t;
      else carry |= uint64_t{1} << (t - 64);
    }
  }
  const uint64_t word = ~sep & valid;
  const uint64_t after_word = (word << 1) | prev_word;
  const uint64_t keep = word | (sep & after_word & valid);
  starts = write_starts(word & ~after_word, keep, static_cast<uint32_t>(w - out), starts);
  w = compact(spaced, keep, w);
  prev_word = word >> 63;
}

// The whole text with a block classifier (the target's or the scalar one).
template <class Classify, class WriteStarts, class Compact>
inline NormalizedCounts NormalizeBlocks(const uint8_t* p, size_t n, uint8_t* out, uint32_t* word_starts,
                                        Classify classify, WriteStarts write_starts, Compact compact) {
  uint8_t* w = out;
  uint32_t* starts = word_starts;
  uint64_t carry = 0, prev_word = 0;
  alignas(64) uint8_t spaced[64];
  alignas(64) uint8_t padded[64];
  for (size_t base = 0; base < n; base += 64) {
    const uint8_t* src = p + base;
    if (n - base < 64) {
      std::memcpy(padded, src, n - base);
      std::memset(padded + (n - base), ' ', 64 - (n - base));  // past the end: separators
      src = padded;
    }
    uint64_t sep, lead;
    classify(src, spaced, &sep, &lead);
    FinishBlock(p, n, base, spaced, sep, lead, carry, prev_word, w, out, starts, write_starts, compact);
  }
  size_t bytes = static_cast<size_t>(w - out);
  if (bytes > 0 && out[bytes - 1] == ' ') --bytes;  // the space after the last word
  return {bytes, static_cast<size_t>(starts - word_starts)};
}
