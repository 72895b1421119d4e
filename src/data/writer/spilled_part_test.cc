// SpilledPart (Note [streamed parts], Note [row groups read back into the
// buffer]): a part of several spilled row groups reads back every row in
// order, through the two passes an Arrow serializer makes, and a serializer
// that fails while the groups are read back loses no row.
#include "data/writer/spilled_part.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "luminamoon/writer.h"
#include "test_support/scratch_dir.h"

namespace luminamoon {
namespace {

// Memory a table holds (capacities), to tell whether a read went into it.
size_t held(const PartTable& t) {
  return t.text.bytes.capacity() + t.fields.bytes.capacity() +
         (t.text.offsets.capacity() + t.fields.offsets.capacity()) * sizeof(int64_t);
}

// Reads every chunk as ArrowSerializer::write_chunks does (a fields-only pass,
// then each chunk in full) and records the rows; fails after the second pass
// while `failures` > 0.
class RecordingSerializer final : public TableSerializer {
 public:
  void write(const PartTable&, int, const std::string&) override { FAIL() << "write_chunks is the path"; }
  void write_chunks(const PartChunks& part, int, const std::string&) override {
    rows.clear();
    PartTable scratch;
    for (size_t k = 0; k < part.chunks(); ++k) {
      const PartTable& fields = part.read(k, scratch, /*fields_only=*/true);
      for (size_t i = 0; i < fields.rows(); ++i) field_pass.emplace_back(fields.fields[i]);
    }
    for (size_t k = 0; k < part.chunks(); ++k) {
      const PartTable& chunk = part.read(k, scratch);
      for (size_t i = 0; i < chunk.rows(); ++i) rows.emplace_back(std::string(chunk.text[i]) + "|" +
                                                                  std::string(chunk.fields[i]));
    }
    scratch_bytes = held(scratch) - held(PartTable());
    if (failures > 0) {
      --failures;
      throw std::runtime_error("disk full (test)");
    }
  }
  std::vector<std::string> rows, field_pass;
  size_t scratch_bytes = 0;  // what the serializer's own scratch table came to hold
  int failures = 0;
};

std::vector<std::string> expected_rows(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("text " + std::to_string(i) + "|{\"id\":" + std::to_string(i) + "}");
  return out;
}

void push_rows(SpilledPart& part, int first, int n) {
  for (int i = first; i < first + n; ++i) {
    part.push("text " + std::to_string(i), "{\"id\":" + std::to_string(i) + "}");
  }
}

TEST(SpilledPart, SpilledGroupsReadBackInOrderThroughBothPasses) {
  test_support::ScratchDir dir("spilled_part_test");
  RecordingSerializer serializer;
  SpilledPart part((dir.path() / "spill.tmp").string(), "text", /*group_rows=*/2, serializer);
  push_rows(part, 0, 5);  // groups of 2, 2 spilled and 1 in memory
  EXPECT_EQ(part.chunks(), 3u);
  part.publish((dir.path() / "part-0.bin").string());
  EXPECT_EQ(serializer.rows, expected_rows(5));
  EXPECT_EQ(serializer.field_pass.size(), 5u);
  // Read back into the part's own buffer: no second row group in the serializer's scratch.
  EXPECT_EQ(serializer.scratch_bytes, 0u);
  EXPECT_EQ(part.rows(), 0u);
  // The next part starts empty and reads back its own rows only.
  push_rows(part, 0, 3);
  part.publish((dir.path() / "part-1.bin").string());
  EXPECT_EQ(serializer.rows, expected_rows(3));
}

TEST(SpilledPart, AFailedPublishLosesNoRowAndCanBeRetried) {
  test_support::ScratchDir dir("spilled_part_test_fail");
  RecordingSerializer serializer;
  serializer.failures = 1;
  SpilledPart part((dir.path() / "spill.tmp").string(), "text", /*group_rows=*/2, serializer);
  push_rows(part, 0, 5);
  EXPECT_THROW(part.publish((dir.path() / "part-0.bin").string()), std::runtime_error);
  EXPECT_EQ(part.rows(), 5u);
  part.publish((dir.path() / "part-0.bin").string());
  EXPECT_EQ(serializer.rows, expected_rows(5));
}

TEST(SpilledPart, APartThatNeverSpilledIsReadFromMemory) {
  test_support::ScratchDir dir("spilled_part_test_memory");
  RecordingSerializer serializer;
  SpilledPart part((dir.path() / "spill.tmp").string(), "text", /*group_rows=*/100, serializer);
  push_rows(part, 0, 4);
  EXPECT_EQ(part.chunks(), 1u);
  part.publish((dir.path() / "part-0.bin").string());
  EXPECT_EQ(serializer.rows, expected_rows(4));
}

}  // namespace
}  // namespace luminamoon
