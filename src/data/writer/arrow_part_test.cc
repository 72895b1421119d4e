// ArrowPart (Note [Arrow parts are streamed]): each full row group reaches the
// serializer's stream while the part is still filling, the part's file
// appears under its final name only at publish, and a stream that fails
// leaves the part broken with its first error and no part file behind.
#include "data/writer/arrow_part.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "luminamoon/data_error.h"
#include "luminamoon/writer.h"
#include "test_support/scratch_dir.h"

namespace luminamoon {
namespace {

// Records the groups it is given and writes one line per row into the file,
// so that the published file's bytes show what reached it; fails the group
// numbered `fail_at` (0-based), if any.
class RecordingSerializer final : public TableSerializer {
 public:
  class Stream final : public PartStream {
   public:
    Stream(RecordingSerializer& owner, int fd) : owner_(owner), fd_(fd) {}
    void write_group(const PartTable& group) override {
      if (owner_.groups.size() == owner_.fail_at) throw std::runtime_error("disk full (test)");
      std::vector<std::string> rows;
      std::string bytes;
      for (size_t i = 0; i < group.rows(); ++i) {
        rows.push_back(std::string(group.text_field.empty() ? "" : group.text[i]) + "|" +
                       std::string(group.fields[i]));
        bytes += rows.back() + "\n";
      }
      owner_.groups.push_back(rows);
      ASSERT_EQ(::write(fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    }
    void close() override { ++owner_.closes; }

   private:
    RecordingSerializer& owner_;
    int fd_;
  };
  std::unique_ptr<PartStream> open(int fd, const std::string&, const std::string&) override {
    ++opens;
    return std::make_unique<Stream>(*this, fd);
  }
  std::vector<std::vector<std::string>> groups;
  size_t fail_at = SIZE_MAX;
  int opens = 0, closes = 0;
};

std::string row(int i) { return "text " + std::to_string(i) + "|{\"id\":" + std::to_string(i) + "}"; }

void push_rows(ArrowPart& part, int first, int n) {
  for (int i = first; i < first + n; ++i) part.push("text " + std::to_string(i), "{\"id\":" + std::to_string(i) + "}");
}

std::string read_all(const std::filesystem::path& p) {
  std::string s;
  FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return "<missing>";
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

TEST(ArrowPart, FullGroupsReachTheStreamBeforeThePartCloses) {
  test_support::ScratchDir dir("arrow_part_test");
  RecordingSerializer serializer;
  const auto final_path = dir.path() / "part-0.bin";
  ArrowPart part("text", /*group_rows=*/2, serializer, [&] { return final_path.string(); });
  push_rows(part, 0, 5);
  // Two full groups written while the part is open; the fifth row waits.
  ASSERT_EQ(serializer.groups.size(), 2u);
  EXPECT_EQ(serializer.groups[0], (std::vector<std::string>{row(0), row(1)}));
  EXPECT_EQ(serializer.groups[1], (std::vector<std::string>{row(2), row(3)}));
  EXPECT_FALSE(std::filesystem::exists(final_path));  // visible only once published
  EXPECT_EQ(part.rows(), 5u);
  const uint64_t bytes = part.publish(final_path.string());
  ASSERT_EQ(serializer.groups.size(), 3u);
  EXPECT_EQ(serializer.groups[2], std::vector<std::string>{row(4)});
  EXPECT_EQ(serializer.closes, 1);
  std::string expected;
  for (int i = 0; i < 5; ++i) expected += row(i) + "\n";
  EXPECT_EQ(read_all(final_path), expected);
  EXPECT_EQ(bytes, expected.size());
  EXPECT_EQ(part.rows(), 0u);
  // No temporary file is left beside the part.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) EXPECT_EQ(e.path(), final_path);
}

TEST(ArrowPart, AnEmptyPartIsStillOpenedAndClosed) {
  test_support::ScratchDir dir("arrow_part_test_empty");
  RecordingSerializer serializer;
  const auto final_path = dir.path() / "part-0.bin";
  ArrowPart part("text", 2, serializer, [&] { return final_path.string(); });
  EXPECT_EQ(part.publish(final_path.string()), 0u);
  EXPECT_EQ(serializer.opens, 1);
  EXPECT_EQ(serializer.closes, 1);  // the stream writes the schema of an empty part
  EXPECT_TRUE(std::filesystem::exists(final_path));
}

TEST(ArrowPart, AFailedGroupBreaksThePartWithItsFirstErrorAndLeavesNoFile) {
  test_support::ScratchDir dir("arrow_part_test_fail");
  RecordingSerializer serializer;
  serializer.fail_at = 1;
  const auto final_path = dir.path() / "part-0.bin";
  {
    ArrowPart part("text", 2, serializer, [&] { return final_path.string(); });
    EXPECT_THROW(push_rows(part, 0, 4), std::runtime_error);  // the second group fails
    try {
      part.push("more", "{}");
      FAIL() << "a broken part took a row";
    } catch (const DataError& e) {
      EXPECT_EQ(e.kind(), DataErrorKind::kOutput);
      EXPECT_NE(std::string(e.what()).find("disk full (test)"), std::string::npos) << e.what();
    }
    EXPECT_THROW(part.publish(final_path.string()), DataError);
  }
  EXPECT_FALSE(std::filesystem::exists(final_path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // the temporary file went with the part
}

TEST(ArrowPart, ThePartAfterAPublishStartsEmptyInAFileOfItsOwn) {
  test_support::ScratchDir dir("arrow_part_test_next");
  RecordingSerializer serializer;
  int next = 0;
  ArrowPart part("text", 2, serializer, [&] { return (dir.path() / ("part-" + std::to_string(next))).string(); });
  push_rows(part, 0, 3);
  part.publish((dir.path() / "part-0").string());
  next = 1;
  push_rows(part, 10, 1);
  part.publish((dir.path() / "part-1").string());
  EXPECT_EQ(serializer.opens, 2);
  EXPECT_EQ(read_all(dir.path() / "part-1"), row(10) + "\n");
}

}  // namespace
}  // namespace luminamoon
