// PIIMasker: one case per type and the checksum validators (the Python tests
// hold the ten-positive / ten-negative tables).
#include "luminamoon/pii_masker.h"

#include <gtest/gtest.h>

namespace luminamoon {
namespace {

std::string mask(const PiiMasker& m, std::string_view s) {
  std::string out;
  std::array<int64_t, kPiiTypeCount> counts{};
  m.mask_document(s, out, counts);
  return out;
}

TEST(PiiValidators, Checksums) {
  EXPECT_TRUE(luhn_valid("4111 1111 1111 1111"));
  EXPECT_FALSE(luhn_valid("4111 1111 1111 1112"));
  EXPECT_TRUE(iban_valid("GB82 WEST 1234 5698 7654 32"));
  EXPECT_FALSE(iban_valid("GB82 WEST 1234 5698 7654 33"));
  EXPECT_TRUE(ssn_valid("123-45-6789"));
  EXPECT_FALSE(ssn_valid("666-45-6789"));
  EXPECT_TRUE(ipv4_valid("192.168.0.1"));
  EXPECT_FALSE(ipv4_valid("999.1.1.1"));
}

TEST(PiiMasker, EachType) {
  const PiiMasker m;
  EXPECT_EQ(mask(m, "mail john.doe@example.com now"), "mail <EMAIL> now");
  EXPECT_EQ(mask(m, "host 8.8.8.8, v6 2001:4860:4860::8888."), "host <IP_ADDRESS>, v6 <IP_ADDRESS>.");
  EXPECT_EQ(mask(m, "call (415) 555-2671 or +44 20 7946 0958"), "call <PHONE> or <PHONE>");
  EXPECT_EQ(mask(m, "card 4111-1111-1111-1111 ok"), "card <CREDIT_CARD> ok");
  EXPECT_EQ(mask(m, "ssn 123-45-6789"), "ssn <SSN>");
  EXPECT_EQ(mask(m, "iban DE89 3704 0044 0532 0130 00 thanks"), "iban <IBAN> thanks");
  EXPECT_EQ(mask(m, "key AKIAIOSFODNN7EXAMPLE end"), "key <SECRET> end");
  EXPECT_EQ(mask(m, "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nb"), "a\n<SECRET>\nb");
}

TEST(PiiMasker, Negatives) {
  const PiiMasker m;
  for (const char* s : {"card 4111 1111 1111 1112", "ip 999.1.1.1", "ISBN 978-0-306-40615-7", "ssn 000-12-3456",
                        "https://medium.com/@john.doe/post"})
    EXPECT_EQ(mask(m, s), s) << s;
}

}  // namespace
}  // namespace luminamoon
