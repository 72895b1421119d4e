// TextCleaner: the spec's steps on hand-written cases, idempotence, policies.
#include "luminamoon/text_cleaner.h"

#include <gtest/gtest.h>

#include <string>

#include "data/clean/clean_kernel.h"

namespace luminamoon {
namespace {

std::string clean(std::string_view in, InvalidUtf8Policy p = InvalidUtf8Policy::kReplace) {
  std::string out;
  TextCleaner(p).clean_document(in, out);
  return out;
}

TEST(TextCleaner, StepsInOrder) {
  EXPECT_EQ(clean("a\r\nb\rc"), "a\nb\nc");
  EXPECT_EQ(clean("a\x01\x7f" "b\tc"), "ab\tc");
  EXPECT_EQ(clean("  lead\t \nx  \t\n\n\n\n  \nend  "), "lead\nx\n\nend");
  EXPECT_EQ(clean("\r\r\r\rx"), "x");
  EXPECT_EQ(clean("x\r\x01\n"), "x");
  EXPECT_EQ(clean(" \x01 \t\n"), "");
  EXPECT_EQ(clean("a \x02\nb"), "a\nb");
}

TEST(TextCleaner, Idempotent) {
  for (std::string s : {"a\n\n\n b \t\r\n\x03", " x\t\ty \n\n\n\nz", "\n\t\n", "\xC3\xA9 \xFF\n\n\nq"}) {
    const std::string once = clean(s);
    EXPECT_EQ(clean(once), once);
  }
}

TEST(TextCleaner, FindControlByteMatchesScalar) {
  std::string s(300, 'a');
  for (size_t pos : {0u, 1u, 31u, 32u, 63u, 64u, 65u, 200u, 299u}) {
    for (char c : {'\x00', '\n', '\x1f', '\x7f'}) {
      std::string t = s;
      t[pos] = c;
      EXPECT_EQ(detail::find_control_byte(reinterpret_cast<const uint8_t*>(t.data()), t.size()), pos);
    }
  }
  EXPECT_EQ(detail::find_control_byte(reinterpret_cast<const uint8_t*>(s.data()), s.size()), s.size());
}

TEST(TextCleaner, Policies) {
  EXPECT_EQ(clean("a\xC0\xAF" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");  // overlong: two subparts
  EXPECT_EQ(clean("a\xE2\x82"), "a\xEF\xBF\xBD");                       // truncated: one
  std::string out;
  EXPECT_EQ(TextCleaner(InvalidUtf8Policy::kDrop).clean_document("a\xFF", out), CleanStatus::kInvalidUtf8);
  EXPECT_THROW(TextCleaner(InvalidUtf8Policy::kError).clean_document("a\xFF", out), InvalidUtf8Error);
  EXPECT_THROW(parse_invalid_utf8_policy("ignore"), std::invalid_argument);
}

TEST(TextCleaner, BatchReportsLowestBadDocument) {
  TextBatch b;
  for (int i = 0; i < 1000; ++i) b.push_back(i == 700 || i == 900 ? "x\xFF" : "ok \n");
  try {
    TextCleaner(InvalidUtf8Policy::kError).clean(b.view());
    FAIL();
  } catch (const InvalidUtf8Error& e) {
    EXPECT_EQ(e.document(), 700u);
    EXPECT_EQ(e.byte_offset(), 1u);
  }
  CleanResult r = TextCleaner().clean(b.view());
  ASSERT_EQ(r.texts.size(), 1000u);
  EXPECT_EQ(r.texts[0], "ok");
}

}  // namespace
}  // namespace luminamoon
