// AppendLog: replay, torn tails cut at every byte, damage in the middle refused.
#include "data/dedup/append_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

namespace fs = std::filesystem;

AppendLogFormat test_format() {
  AppendLogFormat f;
  f.magic = {'T', 'E', 'S', 'T', 'L', 'O', 'G', '1'};
  f.record_size = 8;
  f.params = {1, 2, 3, 4, 5};
  return f;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("lm_append_log_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<uint64_t> replay_all(const WalOptions& o, WalReplayStats* stats = nullptr) {
  std::vector<uint64_t> got;
  AppendLog log(o, test_format(), [&](const uint8_t* r, size_t n) {
    for (size_t i = 0; i < n; ++i) got.push_back(load_le64(r + 8 * i));
  });
  if (stats) *stats = log.replay_stats();
  return got;
}

// Writes blocks of 1, 2, 3 records (values 1..6) and returns block end offsets.
std::vector<uint64_t> write_three_blocks(const WalOptions& o) {
  AppendLog log(o, test_format(), [](const uint8_t*, size_t) {});
  std::vector<uint64_t> ends;
  uint64_t v = 1;
  for (int block = 1; block <= 3; ++block) {
    for (int i = 0; i < block; ++i, ++v) {
      uint8_t rec[8];
      store_le64(rec, v);
      log.append(rec, 1);
    }
    log.commit();
    ends.push_back(log.committed_position());
  }
  return ends;
}

TEST(AppendLog, ReplaysCommittedBlocksAndDropsUncommitted) {
  TempDir dir;
  WalOptions o{.path = (dir.path / "a.log").string()};
  write_three_blocks(o);
  {
    AppendLog log(o, test_format(), [](const uint8_t*, size_t) {});
    uint8_t rec[8];
    store_le64(rec, 99);
    log.append(rec, 1);  // never flushed: must not survive
  }
  WalReplayStats stats;
  EXPECT_EQ(replay_all(o, &stats), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(stats.blocks, 3u);
  EXPECT_EQ(stats.cut_bytes, 0u);
}

TEST(AppendLog, EveryTruncationPointKeepsExactlyTheWholeBlocks) {
  TempDir dir;
  WalOptions o{.path = (dir.path / "a.log").string()};
  auto ends = write_three_blocks(o);
  const auto full = fs::file_size(o.path);
  std::ifstream in(o.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (uint64_t cut = kAppendLogHeaderBytes; cut <= full; ++cut) {
    std::ofstream(o.path, std::ios::binary | std::ios::trunc).write(bytes.data(), cut);
    size_t whole = 0, expect_records = 0;
    while (whole < ends.size() && ends[whole] <= cut) expect_records += ++whole;
    WalReplayStats stats;
    auto got = replay_all(o, &stats);
    ASSERT_EQ(got.size(), expect_records) << "cut at " << cut;
    EXPECT_EQ(fs::file_size(o.path), whole ? ends[whole - 1] : kAppendLogHeaderBytes);
  }
}

TEST(AppendLog, DamagedLastBlockIsCutDamagedMiddleBlockIsAnError) {
  TempDir dir;
  WalOptions o{.path = (dir.path / "a.log").string()};
  auto ends = write_three_blocks(o);
  auto flip = [](const std::string& path, uint64_t offset) {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(offset);
    char c;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x5A));
  };
  flip(o.path, ends[1] + kAppendLogBlockHeaderBytes + 3);  // payload of the last block
  EXPECT_EQ(replay_all(o), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(fs::file_size(o.path), ends[1]);

  flip(o.path, ends[0] + kAppendLogBlockHeaderBytes + 1);  // payload of block 2 of 2: now the tail
  EXPECT_EQ(replay_all(o), (std::vector<uint64_t>{1}));

  TempDir dir2;
  WalOptions o2{.path = (dir2.path / "b.log").string()};
  ends = write_three_blocks(o2);
  flip(o2.path, kAppendLogHeaderBytes + 5);  // header of block 1, blocks 2 and 3 intact
  EXPECT_THROW(replay_all(o2), DataError);
  EXPECT_EQ(fs::file_size(o2.path), ends[2]);  // nothing was cut
}

TEST(AppendLog, ResumePositionCutsLaterBlocksAndIsValidated) {
  TempDir dir;
  WalOptions o{.path = (dir.path / "a.log").string()};
  auto ends = write_three_blocks(o);
  WalOptions bad = o;
  bad.resume_position = ends[0] + 3;
  EXPECT_THROW(replay_all(bad), DataError);
  bad.resume_position = ends[2] + 16;
  EXPECT_THROW(replay_all(bad), DataError);
  WalOptions resume = o;
  resume.resume_position = ends[0];
  EXPECT_EQ(replay_all(resume), (std::vector<uint64_t>{1}));
  EXPECT_EQ(replay_all(o), (std::vector<uint64_t>{1}));
}

TEST(AppendLog, OtherParametersOrAnotherFileAreRefused) {
  TempDir dir;
  WalOptions o{.path = (dir.path / "a.log").string()};
  write_three_blocks(o);
  AppendLogFormat other = test_format();
  other.params[2] = 42;
  try {
    AppendLog log(o, other, [](const uint8_t*, size_t) {});
    FAIL() << "opened with other parameters";
  } catch (const DataError& e) {
    EXPECT_EQ(e.kind(), DataErrorKind::kUsage);
  }
  std::ofstream(o.path, std::ios::binary | std::ios::trunc) << "not a log at all, just some text";
  EXPECT_THROW(replay_all(o), DataError);
  WalOptions missing{.path = (dir.path / "missing" / "x.log").string()};
  EXPECT_THROW(replay_all(missing), DataError);
}

}  // namespace
}  // namespace luminamoon
