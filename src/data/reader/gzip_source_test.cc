// The gzip decoders (Note [gzip decoders]): each gives back exactly the bytes
// that were compressed, across concatenated members and any read size, and
// both refuse the same damage after handing out what came before it (bytes
// decoded from a damaged member before the damage is detected are not
// checked: deflate cannot tell them from good ones until the CRC).
#include "data/reader/gzip_source.h"
#include "data/reader/deflate_for_tests.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "luminamoon/data_error.h"
#include "test_support/scratch_dir.h"

namespace luminamoon {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& name, const std::string& bytes) {
  static const test_support::ScratchDir dir("lm_gzip");
  std::ofstream(dir.path() / name, std::ios::binary) << bytes;
  return dir.path() / name;
}

using test_support::deflate_member;

// JSON-like lines with repeats (long matches) and random words (literals).
std::string text(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  while (out.size() < bytes) {
    out += "{\"text\":\"";
    const int words = 5 + static_cast<int>(rng() % 40);
    for (int w = 0; w < words; ++w) {
      const int len = 1 + static_cast<int>(rng() % 9);
      for (int c = 0; c < len; ++c) out.push_back(static_cast<char>('a' + rng() % 26));
      out.push_back(' ');
    }
    out += "\"}\n";
  }
  out.resize(bytes);
  return out;
}

struct Decoded {
  std::string bytes;
  std::string error;  // the DataError's message, if one was thrown
};

Decoded decode(std::unique_ptr<ByteSource> source, size_t read_size) {
  Decoded d;
  std::vector<char> buffer(read_size);
  try {
    for (;;) {
      const size_t got = source->read(buffer.data(), buffer.size());
      if (got == 0) break;
      d.bytes.append(buffer.data(), got);
    }
  } catch (const DataError& e) {
    EXPECT_EQ(e.kind(), DataErrorKind::kInput);
    d.error = e.what();
  }
  return d;
}

using Opener = std::function<std::unique_ptr<ByteSource>(const std::string&)>;

std::vector<std::pair<std::string, Opener>> decoders() {
  std::vector<std::pair<std::string, Opener>> all{{"zlib", open_gzip_with_zlib}, {"open_gzip", open_gzip}};
  if (open_gzip_with_isal("/dev/null")) all.emplace_back("isa-l", open_gzip_with_isal);
  return all;
}

TEST(GzipSource, TheBuildUsesIsalWhereItWasFound) {
#ifdef LUMINA_HAVE_ISAL
  EXPECT_STREQ(gzip_decoder_name(), "isa-l");
  EXPECT_NE(open_gzip_with_isal("/dev/null"), nullptr);
#else
  EXPECT_STREQ(gzip_decoder_name(), "zlib");
  EXPECT_EQ(open_gzip_with_isal("/dev/null"), nullptr);
#endif
}

TEST(GzipSource, ConcatenatedMembersDecodeToTheOriginalAtEveryReadSize) {
  // Members of 0 bytes, a few bytes, several input chunks (128 KiB) and a
  // stored (level 0) one, so that member ends fall anywhere in a chunk.
  const std::vector<size_t> sizes{0, 17, 300000, 1, 70000, 0, 1 << 20, 5};
  std::string original, compressed;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string part = text(sizes[i], static_cast<uint32_t>(i));
    original += part;
    compressed += deflate_member(part, 15 + 16, i == 4 ? 0 : 6);
  }
  const auto path = temp_file("members.jsonl.gz", compressed).string();
  for (const auto& [name, open] : decoders()) {
    for (size_t read_size : {size_t{1} << 20, size_t{4096}, size_t{7}}) {
      const Decoded d = decode(open(path), read_size);
      EXPECT_EQ(d.error, "") << name << " read " << read_size;
      EXPECT_TRUE(d.bytes == original) << name << " read " << read_size << ": " << d.bytes.size() << " bytes of "
                                       << original.size();
    }
  }
}

TEST(GzipSource, SkipToLandsOnTheSameDecompressedByte) {
  const std::string original = text(400000, 7);
  const auto path = temp_file("skip.jsonl.gz", deflate_member(original.substr(0, 150000)) +
                                                   deflate_member(original.substr(150000)))
                        .string();
  for (const auto& [name, open] : decoders()) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{149999}, uint64_t{150000}, uint64_t{399999}}) {
      auto source = open(path);
      source->skip_to(offset);
      EXPECT_TRUE(decode(std::move(source), 65536).bytes == original.substr(offset)) << name << " at " << offset;
    }
  }
}

TEST(GzipSource, DamageIsAnInputErrorAfterTheBytesBeforeIt) {
  const std::string first = text(200000, 1), second = text(200000, 2);
  const std::string a = deflate_member(first), b = deflate_member(second);
  std::string bad_crc = a;
  bad_crc[bad_crc.size() - 6] ^= 0x55;  // the CRC-32 in the trailer
  std::string bad_data = a + b;
  bad_data[a.size() + b.size() / 2] ^= 0xFF;  // inside the second member's deflate data
  const struct {
    const char* name;
    std::string bytes;
    std::string intact;  // a prefix the decoder must hand out before the error
  } cases[] = {
      {"truncated", (a + b).substr(0, a.size() + b.size() / 2), first},
      {"bad_crc", bad_crc + b, ""},
      {"bad_data", bad_data, first},
      {"trailing_garbage", a + std::string("not gzip at all"), first},
      {"not_gzip", std::string("plain text, not compressed\n"), ""},
  };
  for (const auto& c : cases) {
    const auto path = temp_file(std::string(c.name) + ".jsonl.gz", c.bytes).string();
    for (const auto& [name, open] : decoders()) {
      const Decoded d = decode(open(path), 65536);
      EXPECT_NE(d.error, "") << name << " " << c.name;
      EXPECT_NE(d.error.find(path), std::string::npos) << d.error;
      EXPECT_EQ(d.bytes.compare(0, c.intact.size(), c.intact), 0) << name << " " << c.name;
    }
  }
}

TEST(GzipSource, AZlibWrappedStreamIsDecodedByZlib) {
  const std::string original = text(50000, 3);
  const auto path = temp_file("zlib.jsonl.gz", deflate_member(original, 15)).string();
  const Decoded d = decode(open_gzip(path), 4096);
  EXPECT_EQ(d.error, "");
  EXPECT_TRUE(d.bytes == original);
}

}  // namespace
}  // namespace luminamoon
