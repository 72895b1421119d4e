// HashKeySet against std::unordered_map, and its <= 16 bytes per key bound.
#include "data/dedup/hash_key_set.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace luminamoon {
namespace {

template <class Set>
void check_against_unordered_map() {
  Set set(/*with_refs=*/true);
  std::unordered_map<uint64_t, int64_t> reference;
  std::mt19937_64 rng(7);
  for (int64_t i = 0; i < 200000; ++i) {
    // Few distinct values in the low range force repeats; key 0 is among them.
    uint64_t key = (i % 3 == 0) ? rng() % 5000 : rng();
    int64_t first = -7;
    bool fresh = set.insert(key, i, &first);
    auto [it, inserted] = reference.emplace(key, i);
    ASSERT_EQ(fresh, inserted) << "key " << key;
    if (!fresh) ASSERT_EQ(first, it->second);
  }
  EXPECT_EQ(set.size(), reference.size());
  EXPECT_TRUE(set.contains(0));
  size_t visited = 0;
  set.for_each([&](uint64_t k, int64_t ref) {
    ++visited;
    ASSERT_EQ(reference.at(k), ref);
  });
  EXPECT_EQ(visited, reference.size());
}

TEST(HashKeySet, MatchesUnorderedMapIncludingZeroKey) { check_against_unordered_map<HashKeySet>(); }

// The LSH band tables' layout: refs stored in 32 bits (ids below 2^32).
TEST(HashKeySet, ThirtyTwoBitRefsMatchUnorderedMap) {
  check_against_unordered_map<BasicHashKeySet<uint32_t>>();
  BasicHashKeySet<uint32_t> narrow(/*with_refs=*/true, 1000);
  HashKeySet wide(/*with_refs=*/true, 1000);
  EXPECT_EQ(narrow.memory_bytes() * 4, wide.memory_bytes() * 3);  // 12 against 16 bytes a slot
}

TEST(HashKeySet, InPlaceGrowthKeepsClustersThatWrapAround) {
  // Keys at the very top of the range all land in the last slots and wrap to
  // slot 0: the in-place rehash must move such clusters correctly.
  HashKeySet set(/*with_refs=*/true);
  int64_t first;
  for (int64_t i = 0; i < 5000; ++i) {
    ASSERT_TRUE(set.insert(~uint64_t{0} - static_cast<uint64_t>(i), i, &first));
    ASSERT_TRUE(set.insert(static_cast<uint64_t>(i) + 1, -i, &first));
  }
  for (int64_t i = 0; i < 5000; ++i) {
    ASSERT_FALSE(set.insert(~uint64_t{0} - static_cast<uint64_t>(i), 0, &first));
    ASSERT_EQ(first, i);
    ASSERT_FALSE(set.insert(static_cast<uint64_t>(i) + 1, 0, &first));
    ASSERT_EQ(first, -i);
  }
  EXPECT_EQ(set.size(), 10000u);
}

TEST(HashKeySet, AtMostSixteenBytesPerKeyAtEverySize) {
  HashKeySet set(/*with_refs=*/false);
  std::mt19937_64 rng(11);
  int64_t ignored;
  double worst = 0;
  for (size_t n = 1; n <= 3000000; ++n) {
    set.insert(rng() | 1, 0, &ignored);
    if (n >= 8) worst = std::max(worst, double(set.memory_bytes()) / double(set.size()));
  }
  EXPECT_LE(worst, 16.0);
  EXPECT_GT(worst, 14.0);  // the bound is tight, not accidental
  HashKeySet with_refs(/*with_refs=*/true);
  for (int i = 0; i < 1000; ++i) with_refs.insert(rng() | 1, i, &ignored);
  EXPECT_EQ(with_refs.memory_bytes(), 2 * with_refs.key_bytes());
}

}  // namespace
}  // namespace luminamoon
