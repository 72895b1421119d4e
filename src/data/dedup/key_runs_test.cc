// KeyRuns: every key found with its ref across merged tiers, absent keys not
// found, the tier rule's run count, the scratch file's fallbacks.
#include "data/dedup/key_runs.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>

#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

// The run count the tier rule gives after `flushes` runs of one tier-0 size:
// kMergeFanIn runs of a tier become one of the next, so it is the sum of the
// flush count's digits in base kMergeFanIn (computed here, not by KeyRuns).
size_t runs_after(size_t flushes) {
  size_t digits = 0;
  for (; flushes > 0; flushes /= RunFile::kMergeFanIn) digits += flushes % RunFile::kMergeFanIn;
  return digits;
}

TEST(KeyRuns, FindsEveryKeyWithItsRefAcrossMergedTiers) {
  auto runs = KeyRuns::open("");
  ASSERT_NE(runs, nullptr);
  std::mt19937_64 rng(7);
  std::unordered_map<uint64_t, int64_t> expected;
  // Edge keys beside random ones; run sizes around the 256-entry page.
  std::vector<uint64_t> edges = {0, 1, std::numeric_limits<uint64_t>::max(), uint64_t{1} << 63};
  const size_t sizes[] = {100, 256, 257, 1, 513};
  size_t flushes = 0;
  for (size_t f = 0; f < 37; ++f) {
    std::vector<RunEntry> entries;
    const size_t n = sizes[f % 5];
    while (entries.size() < n) {
      const uint64_t key = !edges.empty() ? edges.back() : rng();
      if (!edges.empty()) edges.pop_back();
      const int64_t ref = static_cast<int64_t>(rng() >> 1) * (f % 2 == 0 ? 1 : -1);
      if (expected.emplace(key, ref).second) entries.push_back({key, static_cast<uint64_t>(ref)});
    }
    runs->add_run(entries);
    runs->merge_full_tiers();
    EXPECT_TRUE(entries.empty());
    ++flushes;
    EXPECT_EQ(runs->runs(), runs_after(flushes)) << "after " << flushes << " runs";
  }
  EXPECT_EQ(runs->size(), expected.size());
  for (const auto& [key, ref] : expected) {
    int64_t found = 0;
    ASSERT_TRUE(runs->find(key, &found)) << key;
    EXPECT_EQ(found, ref) << key;
  }
  size_t absent_found = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t key = rng();
    int64_t ignored;
    if (!expected.count(key)) absent_found += runs->find(key, &ignored);
  }
  EXPECT_EQ(absent_found, 0u);
  std::unordered_map<uint64_t, int64_t> listed;
  runs->for_each([&](uint64_t key, int64_t ref) { EXPECT_TRUE(listed.emplace(key, ref).second) << key; });
  EXPECT_EQ(listed, expected);
  // ~1.3 bytes a key of filter and fences, not the 16 of the entries.
  EXPECT_LT(runs->memory_bytes(), expected.size() * 4 + 4096);
}

// Adds runs of 1,000 keys (16 KB) under a file size limit until a write
// fails (EFBIG), then adds `after` more runs with the limit lifted; every key
// of a run that was added must be found with its ref.
void write_fails_then_recovers(rlim_t limit, size_t runs_when_failed, size_t after, size_t runs_at_end) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* const saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  auto runs = KeyRuns::open("");
  ASSERT_NE(runs, nullptr);
  rlimit small = saved;
  small.rlim_cur = limit;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::mt19937_64 rng(9);
  std::unordered_map<uint64_t, int64_t> expected;
  auto add = [&] {
    std::vector<RunEntry> entries;
    for (int i = 0; i < 1000; ++i) entries.push_back({rng(), rng() >> 2});
    const std::vector<RunEntry> added = entries;
    runs->add_run(entries);
    for (const auto& e : added) expected.emplace(e.key, static_cast<int64_t>(e.value));
    runs->merge_full_tiers();
  };
  std::string error;
  for (int f = 0; f < 8 && error.empty(); ++f) {
    try {
      add();
    } catch (const DataError& e) {
      error = e.what();
    }
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);
  EXPECT_NE(error.find("dedup key runs"), std::string::npos) << error;
  EXPECT_EQ(runs->size(), expected.size());
  EXPECT_EQ(runs->runs(), runs_when_failed);
  for (size_t i = 0; i < after; ++i) add();
  runs->merge_full_tiers();
  EXPECT_EQ(runs->runs(), runs_at_end);
  EXPECT_EQ(runs->size(), expected.size());
  for (const auto& [key, ref] : expected) {
    int64_t found = 0;
    ASSERT_TRUE(runs->find(key, &found)) << key;
    EXPECT_EQ(found, ref) << key;
  }
}

TEST(KeyRuns, AMergeWhoseWriteFailsLeavesItsInputs) {
  write_fails_then_recovers(64 * 1024, 4, 0, 1);  // four runs fit, their merge does not
}

TEST(KeyRuns, ARunWhoseWriteFailsPartWayIsNotAdded) {
  // The third run's write stops after 8 KB: no run, and the next write
  // lands over those bytes, not after them.
  write_fails_then_recovers(40 * 1024, 2, 2, 1);
}

TEST(KeyRuns, AnEmptyRunAddsNothing) {
  auto runs = KeyRuns::open("");
  ASSERT_NE(runs, nullptr);
  std::vector<RunEntry> none;
  runs->add_run(none);
  EXPECT_EQ(runs->runs(), 0u);
  int64_t ref;
  EXPECT_FALSE(runs->find(42, &ref));
}

TEST(KeyRuns, FallsBackToTmpdirAndIsNullWhereNoScratchFileCanBeMade) {
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  EXPECT_NE(KeyRuns::open("/nonexistent-lm-dir"), nullptr);  // TMPDIR (or /tmp) instead
  ::setenv("TMPDIR", "/nonexistent-lm-dir", 1);
  EXPECT_EQ(KeyRuns::open("/nonexistent-lm-dir"), nullptr);
  if (saved) {
    ::setenv("TMPDIR", saved_value.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace luminamoon
