// StreamDeduplicator: first occurrence kept, matches named, WAL reopen.
#include "luminamoon/stream_deduplicator.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#ifdef LUMINA_NORMALIZE_WITH_HWY
// As in normalize_kernel.cc: so that the targets listed below include AVX3_DL.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <hwy/targets.h>
#endif

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

// Note [dedup normalization] one byte at a time, written from the note alone.
std::string normalize_by_the_note(const std::string& t) {
  auto separator_at = [&](size_t i) -> size_t {  // length of the separator at i, or 0
    const auto c = static_cast<unsigned char>(t[i]);
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    if (c < 0x80 && std::ispunct(c)) return 1;
    auto at = [&](size_t k) { return i + k < t.size() ? static_cast<unsigned char>(t[i + k]) : 0; };
    if (c == 0xC2 && at(1) == 0xA0) return 2;
    if (c == 0xE2 && at(2) >= 0x80 && at(2) <= 0xBF && (at(1) == 0x80 || (at(1) == 0x81 && at(2) <= 0xAF))) return 3;
    if (c == 0xE3 && at(1) == 0x80 && at(2) >= 0x80 && at(2) <= 0xBF) return 3;
    return 0;
  };
  std::string out, word;
  for (size_t i = 0; i <= t.size();) {
    const size_t sep = i == t.size() ? 1 : separator_at(i);
    if (sep == 0) {
      const char c = t[i++];
      word += c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
      continue;
    }
    if (!word.empty()) out += (out.empty() ? "" : " ") + word, word.clear();
    i += sep;
  }
  return out;
}

// Normalizes every text on every compiled and supported target and compares
// the text and the word bounds with normalize_by_the_note.
void expect_the_note_on_every_target(const std::vector<std::string>& texts) {
  std::vector<int64_t> targets{0};
#ifdef LUMINA_NORMALIZE_WITH_HWY
  targets = hwy::SupportedAndGeneratedTargets();
#endif
  std::string out;
  std::vector<uint32_t> bounds;
  for (int64_t target : targets) {
#ifdef LUMINA_NORMALIZE_WITH_HWY
    hwy::SetSupportedTargetsForTest(target);
#endif
    for (const auto& t : texts) {
      const std::string expect = normalize_by_the_note(t);
      normalize_words(t, out, bounds);
      ASSERT_EQ(out, expect) << "target " << target << ", text of " << t.size() << " bytes";
      std::string rejoined;
      for (size_t k = 0; k < bounds.size(); k += 2) {
        rejoined += (k ? " " : "") + out.substr(bounds[k], bounds[k + 1] - bounds[k]);
      }
      ASSERT_EQ(rejoined, expect) << "target " << target << ", text of " << t.size() << " bytes";
    }
  }
#ifdef LUMINA_NORMALIZE_WITH_HWY
  hwy::SetSupportedTargetsForTest(0);
#endif
}

TEST(TextNormalize, EqualsTheNoteByteByByteOnEveryTarget) {
  // Separators of every kind, look-alikes of the multi-byte ones (wrong or
  // missing continuation bytes), texts cut anywhere and across 64-byte blocks.
  const char* atoms[] = {"a", "B", "xyz", " ", "  ", ",", ".", "\t", "\xC2\xA0", "\xC2", "\xA0", "\xE2\x80\x94",
                         "\xE2\x81\xAF", "\xE2\x81\xB0", "\xE3\x80\x80", "\xE3\x80", "\xE2", "\xE3\x81\x81",
                         "Z", "\xFF", "\xC3\xA9", "-", "a_rather_long_identifier_", "q"};
  std::mt19937_64 rng(15);
  std::vector<std::string> texts;
  for (int d = 0; d < 3000; ++d) {
    std::string s;
    const size_t len = rng() % 300;
    while (s.size() < len) s += atoms[rng() % std::size(atoms)];
    if (rng() % 3 == 0) s = s.substr(rng() % (s.size() + 1));
    texts.push_back(s);
  }
  expect_the_note_on_every_target(texts);
}

TEST(TextNormalize, EveryByteValueAtEveryBlockOffsetEqualsTheNote) {
  // The classifier looks bytes up by nibble: each of the 256 values, inside
  // a word (between two word bytes), alone, and next to separators, at every
  // offset of the first two 64-byte blocks.
#ifdef LUMINA_NORMALIZE_WITH_HWY
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) std::printf("normalization target: %s\n", hwy::TargetName(target));
#endif
  std::vector<std::string> texts;
  for (int c = 0; c < 256; ++c) {
    const std::string b(1, static_cast<char>(c));
    for (size_t offset = 0; offset < 130; ++offset) {
      std::string prefix;
      while (prefix.size() < offset) prefix += (prefix.size() % 7 == 6) ? ' ' : static_cast<char>('A' + prefix.size() % 26);
      texts.push_back(prefix + b + "Qz" + b + b + " tail");
      texts.push_back(prefix + "w" + b + "W");
    }
  }
  expect_the_note_on_every_target(texts);
}

TEST(TextNormalize, BlockAndWordCountEdgesEqualTheNote) {
  std::vector<std::string> texts = {"", " ", "\t\n ,,, ", std::string(64, ' '), std::string(200, ','), "x", "X."};
  for (size_t len : {15, 16, 17, 63, 64, 65, 127, 128, 129, 300}) {
    texts.push_back(std::string(len, 'W'));                 // one word ending at or across a block's end
    texts.push_back(std::string(len, 'w') + " ");           // a separator just past it
    texts.push_back(" " + std::string(len - 1, 'z') + ",");  // a word from byte 1
    std::string one_letter_words;  // 32 word starts a block: past every fast path's count
    while (one_letter_words.size() < len) {
      one_letter_words += static_cast<char>('a' + one_letter_words.size() % 26);
      one_letter_words += ' ';
    }
    texts.push_back(one_letter_words);
    texts.push_back(one_letter_words.substr(1));
    std::string two_space;  // runs of separators where words join
    while (two_space.size() < len) two_space += "Ab ,\xC2\xA0";
    texts.push_back(two_space);
  }
  // Bytes >= 0x80 inside words (UTF-8, broken UTF-8) at a vector's end.
  for (size_t offset : {0, 14, 15, 30, 31, 62, 63, 64, 126, 127}) {
    const std::string pad(offset, 'p');
    for (const char* mid : {"caf\xC3\xA9s", "na\xEF\xBF\xBDve", "x\xE2\x80", "\xE2\x80\x94y", "\xFF\xFE", "\xC2\xA1!",
                            "\xE3\x80\x80q", "\xE2\x81\xB0r"}) {
      texts.push_back(pad + mid + " End");
      texts.push_back(pad + " " + mid);
    }
  }
  expect_the_note_on_every_target(texts);
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

// Documents drawn with repeats from a pool; the decisions of a reference
// (first ref per text, std::unordered_map) written here.
struct DrawnStream {
  std::vector<std::string> texts;
  std::vector<int64_t> refs;
  std::vector<uint8_t> keep;
  std::vector<int64_t> matched;
  size_t distinct = 0;
};

DrawnStream drawn_stream(size_t docs, size_t pool, uint64_t seed) {
  DrawnStream s;
  std::mt19937_64 rng(seed);
  std::unordered_map<std::string, int64_t> first;
  for (size_t i = 0; i < docs; ++i) {
    std::string text = "pooled document " + std::to_string(rng() % pool);
    const int64_t ref = static_cast<int64_t>(i) * 3 + (int64_t{1} << 40);  // refs over 32 bits
    auto [it, fresh] = first.emplace(text, ref);
    s.keep.push_back(fresh ? 1 : 0);
    s.matched.push_back(fresh ? kNoMatch : it->second);
    s.texts.push_back(std::move(text));
    s.refs.push_back(ref);
  }
  s.distinct = first.size();
  return s;
}

// Adds the stream in batches of uneven sizes; returns keep and matched.
std::pair<std::vector<uint8_t>, std::vector<int64_t>> add_in_batches(StreamDeduplicator& d, const DrawnStream& s,
                                                                     size_t from = 0) {
  std::vector<uint8_t> keep;
  std::vector<int64_t> matched;
  const size_t sizes[] = {1, 700, 33, 2048, 5};
  for (size_t at = from, k = 0; at < s.texts.size(); ++k) {
    const size_t n = std::min(sizes[k % 5], s.texts.size() - at);
    auto b = batch_of(std::vector<std::string>(s.texts.begin() + at, s.texts.begin() + at + n));
    std::vector<uint8_t> bk(n);
    std::vector<int64_t> bm(n);
    d.add(b.view(), std::span<const int64_t>(s.refs.data() + at, n), bk, bm);
    keep.insert(keep.end(), bk.begin(), bk.end());
    matched.insert(matched.end(), bm.begin(), bm.end());
    at += n;
  }
  return {keep, matched};
}

TEST(StreamDeduplicator, KeysSpilledToDiskDecideAsTheReference) {
  const DrawnStream s = drawn_stream(30000, 15000, 11);
  StreamDeduplicatorOptions o;
  o.memory_keys = 1000;
  StreamDeduplicator spilled(o);
  auto [keep, matched] = add_in_batches(spilled, s);
  EXPECT_EQ(keep, s.keep);
  EXPECT_EQ(matched, s.matched);
  EXPECT_EQ(spilled.distinct(), s.distinct);
  EXPECT_GT(spilled.spilled_keys(), s.distinct - 1000);
  std::set<uint64_t> expected_keys;
  for (size_t i = 0; i < s.texts.size(); ++i) {
    if (s.keep[i]) expected_keys.insert(XXH3_64bits(s.texts[i].data(), s.texts[i].size()));
  }
  auto keys = spilled.keys();
  EXPECT_EQ(keys.size(), expected_keys.size());
  EXPECT_EQ(std::set<uint64_t>(keys.begin(), keys.end()), expected_keys);
  for (uint64_t k : expected_keys) ASSERT_TRUE(spilled.contains_key(k));
  EXPECT_FALSE(spilled.contains_key(XXH3_64bits("never added", 11)));
  StreamDeduplicator in_memory;  // the same stream, every key in memory
  auto [keep_mem, matched_mem] = add_in_batches(in_memory, s);
  EXPECT_EQ(keep_mem, keep);
  EXPECT_EQ(matched_mem, matched);
  EXPECT_EQ(in_memory.spilled_keys(), 0u);
  EXPECT_LT(spilled.memory_bytes() * 4, in_memory.memory_bytes());
}

TEST(StreamDeduplicator, WithoutAScratchFileEveryKeyStaysInMemory) {
  const DrawnStream s = drawn_stream(5000, 2500, 12);
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  ::setenv("TMPDIR", "/nonexistent-lm-dir", 1);
  StreamDeduplicatorOptions o;
  o.memory_keys = 100;
  o.spill_dir = "/nonexistent-lm-dir";
  StreamDeduplicator d(o);
  if (saved) {
    ::setenv("TMPDIR", saved_value.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  auto [keep, matched] = add_in_batches(d, s);
  EXPECT_EQ(keep, s.keep);
  EXPECT_EQ(matched, s.matched);
  EXPECT_EQ(d.spilled_keys(), 0u);
  EXPECT_EQ(d.distinct(), s.distinct);
}

TEST(StreamDeduplicator, SpilledKeysComeBackFromTheWalOnReopen) {
  auto dir = fs::temp_directory_path() / ("lm_dedup_spill_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const DrawnStream s = drawn_stream(12000, 6000, 13);
  StreamDeduplicatorOptions o;
  o.wal.path = (dir / "x.dedup").string();
  o.memory_keys = 500;
  o.spill_dir = dir.string();
  const size_t half = s.texts.size() / 2;
  {
    StreamDeduplicator first(o);
    DrawnStream head = s;
    head.texts.resize(half);
    head.refs.resize(half);
    auto [keep, matched] = add_in_batches(first, head);
    EXPECT_EQ(keep, std::vector<uint8_t>(s.keep.begin(), s.keep.begin() + half));
    EXPECT_GT(first.spilled_keys(), 0u);
    first.commit();
  }
  StreamDeduplicator reopened(o);  // the WAL's keys replayed through the spill
  EXPECT_GT(reopened.spilled_keys(), 0u);
  auto [keep, matched] = add_in_batches(reopened, s, half);
  EXPECT_EQ(keep, std::vector<uint8_t>(s.keep.begin() + half, s.keep.end()));
  EXPECT_EQ(matched, std::vector<int64_t>(s.matched.begin() + half, s.matched.end()));
  EXPECT_EQ(reopened.distinct(), s.distinct);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace luminamoon
