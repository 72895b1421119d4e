// The normalized form of a text that near-duplicate detection (and, on
// request, exact dedup) works on: lower-case words separated by one space.
#pragma once

#include <cstdint>
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
// normalize_words() writes the normalized text into `out` and the [begin,
// end) byte range of every word in it into `word_ends` as pairs (begin0,
// end0, begin1, end1, ...).
void normalize_words(std::string_view text, std::string& out, std::vector<uint32_t>& word_bounds);

// The normalized text alone.
std::string normalize_for_dedup(std::string_view text);

}  // namespace luminamoon
