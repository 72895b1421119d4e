// The normalized form of a text that near-duplicate detection (and, on
// request, exact dedup) works on: lower-case words separated by one space.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace luminamoon {

// Note [dedup normalization]
// A text is split into words at separators; words are joined by one space.
// Separators: ASCII whitespace (\t \n \v \f \r and space), ASCII punctuation
// (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~), U+00A0 (no-break space), the General
// Punctuation block U+2000..U+206F (typographic spaces, dashes, quotes,
// ellipsis) and U+3000..U+303F (CJK symbols and punctuation). Inside words
// ASCII A-Z become a-z; every other byte is kept as is (no Unicode case
// folding, no NFKC: a deliberate, documented limit that keeps the pass
// byte-level and locale-free). Leading and trailing separators vanish.
//
// The normalized form of one text and where each of its words starts, in
// buffers that are reused from text to text (grown, never cleared or
// shrunk: a thread keeps one).
class NormalizedWords {
 public:
  void assign(std::string_view text);
  std::string_view text() const { return {text_.get(), bytes_}; }
  size_t words() const { return words_; }
  // word_start(k) for k < words() is the offset of word k's first byte;
  // word_start(words()) is text().size() + 1, so word k ends (exclusive) at
  // word_start(k + 1) - 1.
  uint32_t word_start(size_t k) const { return starts_[k]; }
  const uint32_t* word_starts() const { return starts_.get(); }

 private:
  std::unique_ptr<char[]> text_;
  std::unique_ptr<uint32_t[]> starts_;
  size_t capacity_ = 0;  // of text_, in input bytes
  size_t bytes_ = 0, words_ = 0;
};

// normalize_words() writes the normalized text into `out` and the [begin,
// end) byte range of every word in it into `word_ends` as pairs (begin0,
// end0, begin1, end1, ...).
void normalize_words(std::string_view text, std::string& out, std::vector<uint32_t>& word_bounds);

// The normalized text alone.
std::string normalize_for_dedup(std::string_view text);

}  // namespace luminamoon
