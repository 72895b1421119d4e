// Fuzz target: the PIIMasker keeps every byte outside its matches identical
// and its output valid UTF-8 (spec section 6): mask_document must equal the
// input with each find() span replaced by its placeholder, and the spans are
// in order, disjoint and on code point boundaries.
#include <string>

#include "fuzz/fuzz_support.h"
#include "luminamoon/pii_masker.h"
#include "luminamoon/text_cleaner.h"

namespace {
bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminamoon;
  static const PiiMasker masker;
  std::string text;  // the masker's input is valid UTF-8 (the cleaner runs first)
  replace_invalid_utf8(std::string_view(reinterpret_cast<const char*>(data), size), text);
  std::vector<PiiMatch> matches = masker.find(text);
  std::string expected;
  size_t at = 0;
  for (const PiiMatch& m : matches) {
    LUMINA_FUZZ_CHECK(m.begin >= at && m.begin < m.end && m.end <= text.size());
    LUMINA_FUZZ_CHECK(!is_continuation(text[m.begin]));
    LUMINA_FUZZ_CHECK(m.end == text.size() || !is_continuation(text[m.end]));
    expected.append(text, at, m.begin - at);
    expected += pii_placeholder(m.type);
    at = m.end;
  }
  expected.append(text, at, std::string::npos);
  std::string out;
  std::array<int64_t, kPiiTypeCount> counts{};
  masker.mask_document(text, out, counts);
  LUMINA_FUZZ_CHECK(out == expected, "bytes outside the matches changed");
  LUMINA_FUZZ_CHECK(is_valid_utf8(out));
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  LUMINA_FUZZ_CHECK(total == static_cast<int64_t>(matches.size()));
  return 0;
}
