// StateTracker tests: the slot bytes against an independent encoding, ping-pong,
// torn slots, both slots corrupt.
#include "luminamoon/state_tracker.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "luminamoon/data_error.h"
#include "test_support/scratch_dir.h"

namespace luminamoon {
namespace {

std::string temp_meta(const char* name) {
  static const test_support::ScratchDir dir("lm_state");
  auto path = dir.path() / name;
  std::filesystem::remove(path);
  return path.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void poke(const std::string& path, size_t offset, char byte) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(byte);
}

TEST(StreamCoordinate, EncodesLittleEndianAtSpecOffsets) {
  StreamCoordinate c{0x04030201u, 0x0c0b0a0908070605ull, 0x100f0e0du, 0x14131211u,
                     0x18171615u, 0x201f1e1d1c1b1a19ull};
  uint8_t bytes[32];
  c.encode(bytes);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(bytes[i], i + 1) << "byte " << i;
  EXPECT_EQ(StreamCoordinate::decode(bytes), c);
}

TEST(StateTracker, SlotLayoutMatchesSpec) {
  Checkpoint cp;
  cp.sequence = 7;
  cp.flags = 1;
  cp.coordinate.shard_id = 3;
  cp.coordinate.byte_offset = 1234;
  cp.output_position = 42;
  uint8_t slot[64];
  StateTracker::encode_slot(cp, slot);
  EXPECT_EQ(slot[0] | slot[1] << 8 | slot[2] << 16 | uint32_t(slot[3]) << 24,
            StateTracker::kMagic);
  EXPECT_EQ(slot[4], 1);  // version
  EXPECT_EQ(slot[6], 1);  // flags
  EXPECT_EQ(slot[8], 7);  // sequence
  EXPECT_EQ(slot[16], 3);  // coordinate.shard_id
  EXPECT_EQ(slot[20] | slot[21] << 8, 1234);  // coordinate.byte_offset
  EXPECT_EQ(slot[48], 42);  // output position
  uint32_t stored = slot[60] | slot[61] << 8 | slot[62] << 16 | uint32_t(slot[63]) << 24;
  EXPECT_EQ(stored, static_cast<uint32_t>(::crc32(0, slot, 60)));
  auto back = StateTracker::decode_slot(slot);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->coordinate, cp.coordinate);
  slot[30] ^= 1;
  EXPECT_FALSE(StateTracker::decode_slot(slot));
}

TEST(StateTracker, NonZeroReservedWordWithValidCrcIsNotASlot) {
  // Found by fuzz_checkpoint_meta: a slot whose reserved word (bytes 56..59)
  // is non-zero but whose CRC32 was recomputed over it decoded, and re-encoding
  // it gave different bytes. The spec writes that word as zero.
  Checkpoint cp;
  cp.sequence = 5;
  cp.output_position = 2;
  uint8_t slot[64];
  StateTracker::encode_slot(cp, slot);
  slot[57] = 0x20;
  const uint32_t crc = static_cast<uint32_t>(::crc32(0, slot, 60));
  for (int i = 0; i < 4; ++i) slot[60 + i] = static_cast<uint8_t>(crc >> (8 * i));
  EXPECT_FALSE(StateTracker::decode_slot(slot));
}

TEST(StateTracker, MissingFileIsAFreshRun) {
  StateTracker t(temp_meta("missing.meta"));
  EXPECT_FALSE(t.load());
}

TEST(StateTracker, CommitsAlternateSlotsAndHighestSequenceWins) {
  auto path = temp_meta("pingpong.meta");
  {
    StateTracker t(path);
    ASSERT_FALSE(t.load());
    for (uint64_t i = 1; i <= 5; ++i) {
      StreamCoordinate c;
      c.global_row_idx = i * 10;
      t.commit(c, i);
    }
  }
  std::string bytes = slurp(path);
  ASSERT_EQ(bytes.size(), 128u);
  auto a = StateTracker::decode_slot(reinterpret_cast<const uint8_t*>(bytes.data()));
  auto b = StateTracker::decode_slot(reinterpret_cast<const uint8_t*>(bytes.data()) + 64);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->sequence, 5u);  // 1,3,5 in A; 2,4 in B
  EXPECT_EQ(b->sequence, 4u);
  StateTracker t(path);
  auto cp = t.load();
  ASSERT_TRUE(cp);
  EXPECT_EQ(cp->coordinate.global_row_idx, 50u);
  EXPECT_EQ(cp->output_position, 5u);
}

TEST(StateTracker, CorruptNewestSlotFallsBackToTheOther) {
  auto path = temp_meta("torn.meta");
  {
    StateTracker t(path);
    t.load();
    StreamCoordinate c;
    c.global_row_idx = 1;
    t.commit(c, 1);
    c.global_row_idx = 2;
    t.commit(c, 2);  // slot B
  }
  poke(path, 64 + 20, 'x');  // tear slot B
  StateTracker t(path);
  auto cp = t.load();
  ASSERT_TRUE(cp);
  EXPECT_EQ(cp->sequence, 1u);
  EXPECT_EQ(t.invalid_slots_at_load(), 1);
  // The next commit overwrites the torn slot, not the good one.
  StreamCoordinate c;
  c.global_row_idx = 3;
  t.commit(c, 3);
  StateTracker again(path);
  EXPECT_EQ(again.load()->coordinate.global_row_idx, 3u);
  EXPECT_EQ(again.invalid_slots_at_load(), 0);
}

TEST(StateTracker, BothSlotsCorruptIsAClearError) {
  auto path = temp_meta("both.meta");
  {
    StateTracker t(path);
    t.load();
    t.commit({}, 1);
    t.commit({}, 2);
  }
  poke(path, 3, 'x');
  poke(path, 64 + 3, 'x');
  StateTracker t(path);
  try {
    t.load();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.kind(), DataErrorKind::kStateCorrupt);
    EXPECT_NE(std::string(e.what()).find("both slots"), std::string::npos);
  }
}

TEST(StateTracker, WrongSizeIsAClearError) {
  auto path = temp_meta("short.meta");
  std::ofstream(path, std::ios::binary) << "short";
  StateTracker t(path);
  EXPECT_THROW(t.load(), DataError);
}

}  // namespace
}  // namespace luminamoon
