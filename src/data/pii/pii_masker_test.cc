// PIIMasker: one case per type and the checksum validators (the Python tests
// hold the ten-positive / ten-negative tables).
#include "luminamoon/pii_masker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#ifdef LUMINA_PII_VECTORSCAN
#include "data/pii/vectorscan_database_cache.h"
#endif

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

#ifdef LUMINA_PII_VECTORSCAN
// Note [database cache]: a second masker reads the databases the first one
// compiled; corrupt and truncated files are compiled again and replaced;
// "off" writes nothing. Every masker masks the same (expected by hand).
TEST(PiiMasker, CompiledDatabasesAreCachedAndBadFilesRecompiled) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lm_hs_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ::setenv("LUMINAMOON_CACHE_DIR", dir.c_str(), 1);
  const std::string text = "mail john.doe@example.com, host 8.8.8.8, ssn 123-45-6789";
  const std::string expected = "mail <EMAIL>, host <IP_ADDRESS>, ssn <SSN>";
  auto files = [&] {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
    return out;
  };
  const pii::DatabaseCacheStats s0 = pii::database_cache_stats();
  EXPECT_EQ(mask(PiiMasker(), text), expected);
  const pii::DatabaseCacheStats s1 = pii::database_cache_stats();
  EXPECT_GT(s1.stored, s0.stored);
  const size_t written = files().size();
  EXPECT_EQ(written, s1.stored - s0.stored);  // no temporary file left
  EXPECT_EQ(mask(PiiMasker(), text), expected);
  const pii::DatabaseCacheStats s2 = pii::database_cache_stats();
  EXPECT_GE(s2.loaded - s1.loaded, 1u);
  EXPECT_EQ(s2.stored, s1.stored);
  bool truncate = false;
  for (const fs::path& f : files()) {  // every file damaged: one byte flipped or cut short
    if (truncate) {
      fs::resize_file(f, fs::file_size(f) / 2);
    } else {
      std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
      io.seekg(static_cast<std::streamoff>(fs::file_size(f) / 2));
      char c;
      io.get(c);
      io.seekp(static_cast<std::streamoff>(fs::file_size(f) / 2));
      io.put(static_cast<char>(c ^ 0x5a));
    }
    truncate = !truncate;
  }
  EXPECT_EQ(mask(PiiMasker(), text), expected);
  const pii::DatabaseCacheStats s3 = pii::database_cache_stats();
  EXPECT_EQ(s3.loaded, s2.loaded);  // none accepted
  EXPECT_EQ(s3.stored - s2.stored, s1.stored - s0.stored);  // all replaced
  EXPECT_EQ(mask(PiiMasker(), text), expected);
  EXPECT_EQ(pii::database_cache_stats().loaded - s3.loaded, s2.loaded - s1.loaded);  // and read again
  ::setenv("LUMINAMOON_CACHE_DIR", "off", 1);
  EXPECT_EQ(pii::database_cache_dir(), "");
  EXPECT_EQ(mask(PiiMasker(), text), expected);
  EXPECT_EQ(pii::database_cache_stats().stored, s3.stored);
  ::unsetenv("LUMINAMOON_CACHE_DIR");
  fs::remove_all(dir);
}
#endif

TEST(PiiMasker, Negatives) {
  const PiiMasker m;
  for (const char* s : {"card 4111 1111 1111 1112", "ip 999.1.1.1", "ISBN 978-0-306-40615-7", "ssn 000-12-3456",
                        "https://medium.com/@john.doe/post"})
    EXPECT_EQ(mask(m, s), s) << s;
}

// Note [pattern subsets] and [masking in two passes]: documents with and
// without the bytes the e-mail, E.164 and IPv6 patterns need, in one batch
// (each document gets the database of the bytes it holds), and a masker
// whose every pattern needs a byte (e-mail only: documents without '@' scan
// nothing). The expected outputs are written out by hand.
TEST(PiiMasker, BatchAcrossPatternSubsets) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain words only", "plain words only"},
      {"mail a.b@example.org and 203.0.113.7", "mail <EMAIL> and <IP_ADDRESS>"},
      {"call +44 20 7946 0958 now", "call <PHONE> now"},
      {"v6 2001:4860:4860::8888 and ssn 123-45-6789", "v6 <IP_ADDRESS> and ssn <SSN>"},
      {"", ""},
      {"all: x@y.io, 2001:4860::1, +1 415 555 2671", "all: <EMAIL>, <IP_ADDRESS>, <PHONE>"},
      {"no pii at 10:30 here", "no pii at 10:30 here"},
  };
  std::string bytes;
  std::vector<int64_t> offsets{0};
  for (const auto& c : cases) {
    bytes += c.first;
    offsets.push_back(static_cast<int64_t>(bytes.size()));
  }
  const TextBatchView batch{reinterpret_cast<const uint8_t*>(bytes.data()), offsets.data(), cases.size()};
  const PiiResult r = PiiMasker().mask(batch);
  ASSERT_EQ(r.texts.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(r.texts[i], cases[i].second) << i;
  EXPECT_EQ(r.counts[static_cast<size_t>(PiiType::kEmail)], 2);
  EXPECT_EQ(r.counts[static_cast<size_t>(PiiType::kIpAddress)], 3);
  EXPECT_EQ(r.counts[static_cast<size_t>(PiiType::kPhone)], 2);
  EXPECT_EQ(r.counts[static_cast<size_t>(PiiType::kSsn)], 1);

  PiiOptions email_only;
  email_only.enabled.fill(false);
  email_only.enabled[static_cast<size_t>(PiiType::kEmail)] = true;
  const PiiResult e = PiiMasker(email_only).mask(batch);
  EXPECT_EQ(e.texts[0], "plain words only");
  EXPECT_EQ(e.texts[1], "mail <EMAIL> and 203.0.113.7");
  EXPECT_EQ(e.texts[2], "call +44 20 7946 0958 now");
  EXPECT_EQ(e.texts[5], "all: <EMAIL>, 2001:4860::1, +1 415 555 2671");
  EXPECT_EQ(e.counts[static_cast<size_t>(PiiType::kEmail)], 2);
}

}  // namespace
}  // namespace luminamoon
