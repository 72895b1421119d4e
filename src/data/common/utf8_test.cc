// UTF-8 validation and maximal-subpart replacement on the Unicode standard's examples.
#include <gtest/gtest.h>

#include <string>

#include "luminamoon/text_cleaner.h"

namespace luminamoon {
namespace {

std::string fix(std::string_view s) {
  std::string out;
  replace_invalid_utf8(s, out);
  return out;
}
const std::string R = "\xEF\xBF\xBD";

TEST(Utf8, Validation) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ab\xC3"), 2u);
}

// Unicode 15, section 3.9, Table 3-8: "61 F1 80 80 E1 80 C2 62 80 63 80 BF 64"
// becomes a, FFFD, FFFD, FFFD, b, FFFD, c, FFFD, FFFD, d.
TEST(Utf8, StandardTable38) {
  EXPECT_EQ(fix("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + R + R + R + "b" + R + "c" + R + R + "d");
}

TEST(Utf8, Surrogate) { EXPECT_EQ(fix("\xED\xA0\x80z"), R + R + R + "z"); }

}  // namespace
}  // namespace luminamoon
