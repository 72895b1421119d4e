// Byte-level text normalization for dedup keys and shingles (Note [dedup
// normalization] in text_normalize.h).
#include "data/dedup/text_normalize.h"
#include "data/dedup/normalize_kernel.h"

#include <algorithm>
#include <cstdint>

#include "luminamoon/data_error.h"

namespace luminamoon {

void NormalizedWords::assign(std::string_view text) {
  if (text.size() > UINT32_MAX - kNormalizeSlack) {
    throw DataError(DataErrorKind::kUsage, "dedup: a single text over 4 GiB cannot be shingled");
  }
  const size_t n = text.size();
  if (n > capacity_ || !text_) {
    const size_t capacity = std::max(n, 2 * capacity_);
    // make_unique_for_overwrite: the kernel writes before anything reads, no zero fill.
    text_ = std::make_unique_for_overwrite<char[]>(capacity + kNormalizeSlack);
    starts_ = std::make_unique_for_overwrite<uint32_t[]>(capacity / 2 + 2 + kNormalizeStartsSlack);
    capacity_ = capacity;
  }
  const NormalizedCounts counts = normalize_text(reinterpret_cast<const uint8_t*>(text.data()), n,
                                                 reinterpret_cast<uint8_t*>(text_.get()), starts_.get());
  bytes_ = counts.bytes;
  words_ = counts.words;
  starts_[words_] = static_cast<uint32_t>(bytes_ + 1);
}

void normalize_words(std::string_view text, std::string& out, std::vector<uint32_t>& word_bounds) {
  thread_local NormalizedWords normalized;
  normalized.assign(text);
  out.assign(normalized.text());
  word_bounds.resize(2 * normalized.words());
  for (size_t k = 0; k < normalized.words(); ++k) {
    word_bounds[2 * k] = normalized.word_start(k);
    word_bounds[2 * k + 1] = normalized.word_start(k + 1) - 1;
  }
}

std::string normalize_for_dedup(std::string_view text) {
  thread_local NormalizedWords normalized;
  normalized.assign(text);
  return std::string(normalized.text());
}

}  // namespace luminamoon
