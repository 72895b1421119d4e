// StreamDeduplicator: first occurrence kept, matches named, WAL reopen.
#include "luminamoon/stream_deduplicator.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <set>
#include <string>

#include "data/dedup/text_normalize.h"

namespace luminamoon {
namespace {

namespace fs = std::filesystem;

TextBatch batch_of(const std::vector<std::string>& texts) {
  TextBatch b;
  for (const auto& t : texts) b.push_back(t);
  return b;
}

TEST(StreamDeduplicator, KeepsFirstOccurrenceAndNamesIt) {
  StreamDeduplicator dedup;
  auto b1 = batch_of({"a", "b", "a", "", "c", ""});
  std::vector<uint8_t> keep(6);
  std::vector<int64_t> matched(6);
  dedup.add(b1.view(), {}, keep, matched);
  EXPECT_EQ(keep, (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(matched, (std::vector<int64_t>{-1, -1, 0, -1, -1, 3}));
  auto b2 = batch_of({"c", "d"});
  std::vector<int64_t> refs{100, 101};
  keep.resize(2);
  matched.resize(2);
  dedup.add(b2.view(), refs, keep, matched);
  EXPECT_EQ(keep, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(matched, (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(dedup.distinct(), 5u);
  EXPECT_TRUE(dedup.contains_key(XXH3_64bits("d", 1)));
}

TEST(StreamDeduplicator, NormalizedKeyFoldsCasePunctuationAndSpaces) {
  EXPECT_EQ(normalize_for_dedup("  Hello,\tWORLD!!  it\xE2\x80\x99s\xC2\xA0me... "),
            "hello world it s me");
  StreamDeduplicatorOptions o;
  o.key = DedupKey::kNormalizedText;
  StreamDeduplicator dedup(o);
  auto b = batch_of({"Hello, world!", "hello world", "HELLO -- WORLD", "hello worlds"});
  std::vector<uint8_t> keep(4);
  dedup.add(b.view(), {}, keep, {});
  EXPECT_EQ(keep, (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(StreamDeduplicator, LargeBatchesHashInParallelWithTheSameResult) {
  std::vector<std::string> texts;
  for (int i = 0; i < 60000; ++i) texts.push_back("document number " + std::to_string(i % 40000));
  auto b = batch_of(texts);
  std::vector<uint8_t> keep1(texts.size()), keep4(texts.size());
  StreamDeduplicatorOptions one;
  one.num_threads = 1;
  StreamDeduplicator(one).add(b.view(), {}, keep1, {});
  StreamDeduplicatorOptions two;
  two.num_threads = 2;
  StreamDeduplicator(two).add(b.view(), {}, keep4, {});
  EXPECT_EQ(keep1, keep4);
  EXPECT_EQ(std::count(keep1.begin(), keep1.end(), 1), 40000);
}

TEST(StreamDeduplicator, WalReopenHoldsExactlyTheCommittedKeys) {
  auto dir = fs::temp_directory_path() / ("lm_dedup_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  StreamDeduplicatorOptions o;
  o.wal.path = (dir / "x.dedup").string();
  std::set<uint64_t> committed;
  {
    StreamDeduplicator dedup(o);
    auto b = batch_of({"one", "two", "one"});
    std::vector<uint8_t> keep(3);
    dedup.add(b.view(), {}, keep, {});
    dedup.commit();
    committed = {XXH3_64bits("one", 3), XXH3_64bits("two", 3)};
    auto later = batch_of({"three"});
    keep.resize(1);
    dedup.add(later.view(), {}, keep, {});  // added, never committed
  }
  StreamDeduplicator reopened(o);
  auto keys = reopened.keys();
  EXPECT_EQ(std::set<uint64_t>(keys.begin(), keys.end()), committed);
  auto again = batch_of({"two", "three"});
  std::vector<uint8_t> keep(2);
  std::vector<int64_t> matched(2);
  reopened.add(again.view(), {}, keep, matched);
  EXPECT_EQ(keep, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(matched[0], 1);  // the ref "two" had in the first run, from the WAL
  fs::remove_all(dir);
}

}  // namespace
}  // namespace luminamoon
