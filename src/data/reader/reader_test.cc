// Reader tests: plain, gzip and zstd shards give the same documents; a
// reader opened at any batch's end coordinate yields exactly the rest.
#include "luminamoon/reader.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/reader/deflate_for_tests.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"
#include "test_support/scratch_dir.h"

namespace luminamoon {
namespace {

std::filesystem::path temp_dir() {
  static const test_support::ScratchDir dir("lm_reader");
  return dir.path();
}

std::string jsonl(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "{\"id\":\"d" + std::to_string(i) + "\",\"text\":\"text " + std::to_string(i) +
           " \\u00e9\",\"n\":" + std::to_string(i) + "}\n";
    if (i % 7 == 3) out += "{broken\n";
    if (i % 11 == 5) out += "\n";
  }
  return out;
}

void write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string gzip(const std::string& s) { return test_support::deflate_member(s); }

std::string zstd(const std::string& s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 3));
  return out;
}

struct Read {
  std::vector<std::string> texts, ids, meta;
  std::vector<uint64_t> malformed_lines;
  std::vector<StreamCoordinate> ends;
  std::vector<size_t> texts_at_end;  // documents read before each end
};

Read read_all(const std::string& path, StreamCoordinate start = {}, size_t batch_docs = 4,
              size_t max_record_bytes = ReaderOptions{}.max_record_bytes) {
  ReaderOptions options;
  options.batch_docs = batch_docs;
  options.max_record_bytes = max_record_bytes;
  auto reader = open_shard(describe_shard(path, 0), options, start);
  Read r;
  DocBatch batch;
  while (reader->next(batch)) {
    for (size_t i = 0; i < batch.size(); ++i) {
      r.texts.emplace_back(batch.text[i]);
      r.ids.emplace_back(batch.ids[i]);
      r.meta.emplace_back(batch.metadata[i]);
    }
    for (const auto& bad : batch.malformed) r.malformed_lines.push_back(bad.line);
    r.ends.push_back(batch.end);
    r.texts_at_end.push_back(r.texts.size());
  }
  return r;
}

TEST(Reader, CompressionsAgreeAndMalformedLinesAreCounted) {
  auto dir = temp_dir();
  const std::string data = jsonl(40);
  write(dir / "a.jsonl", data);
  write(dir / "a.jsonl.gz", gzip(data.substr(0, 500)) + gzip(data.substr(500)));  // two members
  write(dir / "a.jsonl.zst", zstd(data));
  Read plain = read_all((dir / "a.jsonl").string());
  ASSERT_EQ(plain.texts.size(), 40u);
  EXPECT_EQ(plain.texts[3], "text 3 \xC3\xA9");
  EXPECT_EQ(plain.ids[3], "d3");
  EXPECT_EQ(plain.meta[3], "{\"id\":\"d3\",\"n\":3}");
  EXPECT_EQ(plain.malformed_lines.size(), 6u);  // i = 3, 10, 17, 24, 31, 38
  EXPECT_EQ(plain.malformed_lines[0], 5u);      // 4 docs, then the broken line
  for (const char* name : {"a.jsonl.gz", "a.jsonl.zst"}) {
    Read other = read_all((dir / name).string());
    EXPECT_EQ(other.texts, plain.texts) << name;
    EXPECT_EQ(other.malformed_lines, plain.malformed_lines) << name;
  }
}

TEST(Reader, ResumingAtEveryBatchEndYieldsExactlyTheRest) {
  auto dir = temp_dir();
  const std::string data = jsonl(30);
  write(dir / "r.jsonl", data);
  write(dir / "r.jsonl.gz", gzip(data));
  for (const char* name : {"r.jsonl", "r.jsonl.gz"}) {
    std::string path = (dir / name).string();
    Read full = read_all(path);
    size_t consumed = 0;
    for (size_t b = 0; b + 1 < full.ends.size(); ++b) {
      Read rest = read_all(path, full.ends[b]);
      // Documents before the coordinate: those of batches 0..b.
      consumed = full.texts.size() - rest.texts.size();
      ASSERT_EQ(rest.texts, std::vector<std::string>(full.texts.begin() + consumed, full.texts.end()))
          << name << " batch " << b;
      EXPECT_EQ(rest.ends.back(), full.ends.back());
    }
    EXPECT_GT(consumed, 0u);
  }
}

// Issue 16, defect 7: a line over max_record_bytes is a counted rejection,
// reading goes on at the next line, and resuming after it works.
TEST(Reader, OverLongLinesAreRejectedAndReadingGoesOn) {
  auto dir = temp_dir();
  const std::string data = "{\"text\":\"one\"}\n{\"text\":\"" + std::string(1000, 'a') +
                           "\"}\n{\"text\":\"three\"}\n{\"text\":\"" + std::string(300, 'b') +
                           "\"}\n{\"text\":\"five\"}\n" + std::string(5000, 'c');  // no final newline
  write(dir / "long.jsonl", data);
  write(dir / "long.jsonl.gz", gzip(data));
  write(dir / "long.jsonl.zst", zstd(data));
  for (const char* name : {"long.jsonl", "long.jsonl.gz", "long.jsonl.zst"}) {
    const std::string path = (dir / name).string();
    Read r = read_all(path, {}, 1, 200);
    EXPECT_EQ(r.texts, (std::vector<std::string>{"one", "three", "five"})) << name;
    EXPECT_EQ(r.malformed_lines, (std::vector<uint64_t>{2, 4, 6})) << name;
    for (size_t b = 0; b < r.ends.size(); ++b) {
      Read rest = read_all(path, r.ends[b], 1, 200);
      EXPECT_EQ(rest.texts, std::vector<std::string>(r.texts.begin() + r.texts_at_end[b], r.texts.end()))
          << name << " batch " << b;
    }
  }
}

// Issue 16, defects 1-4: values simdjson's On-Demand API does not check by
// itself, and duplicate keys, are counted rejections with their lines.
TEST(Reader, MalformedValuesAndDuplicateKeysAreRejected) {
  auto dir = temp_dir();
  const std::vector<std::string> bad = {
      "{\"id\":=5,\"text\":\"x\"}", "{\"id\":,\"text\":\"x\"}", "{\"text\":\"x\",\"v\":tru}",
      "{\"text\":\"x\",\"v\":01}", "{\"text\":\"x\",\"v\":1.}", "{\"text\":\"x\",\"v\":-}",
      "{\"text\":\"x\",\"v\":1e400}", "{\"text\":\"x\",\"v\":18446744073709551616}",
      "{\"text\":\"x\",\"v\":\"\\ud800\"}", "{\"text\":\"x\",\"text\":\"y\"}",
      "{\"text\":\"x\",\"k\":1,\"k\":2}", "{\"text\":\"x\",\"v\":" + std::string(1100, '[') +
                                                   std::string(1100, ']') + "}"};
  std::string data = "{\"id\":\"first\",\"text\":\"ok\"}\n";
  for (const auto& line : bad) data += line + "\n";
  data += "{\"text\":\"last\",\"v\":[1,{\"a\":null}]}\n";
  write(dir / "bad.jsonl", data);
  Read r = read_all((dir / "bad.jsonl").string());
  EXPECT_EQ(r.texts, (std::vector<std::string>{"ok", "last"}));
  std::vector<uint64_t> lines;
  for (size_t i = 0; i < bad.size(); ++i) lines.push_back(i + 2);
  EXPECT_EQ(r.malformed_lines, lines);
  EXPECT_EQ(r.meta[1], "{\"v\":[1,{\"a\":null}]}");
}

TEST(Reader, UnknownExtensionIsAUsageError) {
  try {
    describe_shard("/x/data.csv", 0);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_EQ(e.kind(), DataErrorKind::kUsage);
  }
}

TEST(JsonText, EscapesAndReplacesInvalidUtf8) {
  std::string out;
  json_text::append_string(out, std::string("a\"b\\c\n\x01\xC3\xA9\xFF\xE2\x82", 12));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

// Every byte position and lane of the eight-byte scan (plain_json_run): the
// JSON string append_string makes, parsed by simdjson, is the original text
// for valid UTF-8, and U+FFFD stands for each byte of an ill-formed sequence.
TEST(JsonText, EscapedStringsParseBackToTheOriginalAtEveryAlignment) {
  const std::vector<std::string> specials{"\"", "\\", "\n", "\t", "\x01", "\x1f", "\x7f", "\xC3\xA9",
                                          "\xE2\x82\xAC", "\xF0\x9F\x98\x80", " ", "~", "A"};
  simdjson::dom::parser parser;
  for (size_t len = 0; len < 40; ++len) {
    for (size_t at = 0; at <= len; ++at) {
      for (const auto& special : specials) {
        const std::string text = std::string(at, 'x') + special + std::string(len - at, 'y');
        std::string json;
        json_text::append_string(json, text);
        simdjson::padded_string padded(json);
        std::string_view parsed;
        ASSERT_EQ(parser.parse(padded).get_string().get(parsed), simdjson::SUCCESS) << json;
        EXPECT_EQ(parsed, text) << "len " << len << " at " << at;
      }
      std::string bad = std::string(at, 'x') + "\xC3" + std::string(len - at, 'y');  // a lead byte alone
      std::string json;
      json_text::append_string(json, bad);
      EXPECT_EQ(json, "\"" + std::string(at, 'x') + "\xEF\xBF\xBD" + std::string(len - at, 'y') + "\"");
    }
  }
}

}  // namespace
}  // namespace luminamoon
