// PendingFile: every byte of appends spanning several write-back windows lands
// in the published file, and the pages already written leave the page cache as
// the file grows (Note [written pages dropped]).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/state/durable_io.h"
#include "test_support/scratch_dir.h"

namespace luminamoon::durable {
namespace {

const test_support::ScratchDir& scratch() {
  static const test_support::ScratchDir dir("lm_pending_file");
  return dir;
}

// Byte i of the expected content: a pattern no window boundary lines up with.
char pattern_byte(uint64_t i) { return static_cast<char>((i * 2654435761u) >> 13); }

std::string pattern(uint64_t from, size_t n) {
  std::string s(n, '\0');
  for (size_t j = 0; j < n; ++j) s[j] = pattern_byte(from + j);
  return s;
}

// Resident pages of [offset, offset + length) of the file at `path` (mincore).
size_t resident_pages(const std::string& path, uint64_t offset, size_t length) {
  // A failure reads as "every page resident", which fails the callers' bounds.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (length + page - 1) / page;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pages;
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset));
  ::close(fd);
  if (map == MAP_FAILED) return pages;
  std::vector<unsigned char> in_core(pages);
  const bool ok = ::mincore(map, length, in_core.data()) == 0;
  ::munmap(map, length);
  if (!ok) return pages;
  size_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident;
}

// tmpfs and ramfs keep a file's pages in memory: there is nowhere to drop them to.
bool pages_can_leave_memory(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return false;
  constexpr long kTmpfs = 0x01021994, kRamfs = 0x858458f6;
  return fs.f_type != kTmpfs && fs.f_type != kRamfs;
}

TEST(PendingFile, AppendsAcrossWindowsArePublishedWhole) {
  const std::string path = (scratch().path() / "whole.bin").string();
  const uint64_t total = 3 * PendingFile::kWritebackWindow + 12345;
  {
    PendingFile file(path);
    for (uint64_t at = 0; at < total;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(total - at, 1000003));  // odd-sized appends
      file.append(pattern(at, n));
      at += n;
    }
    EXPECT_EQ(file.bytes_written(), total);
    file.finish();
  }
  std::ifstream in(path, std::ios::binary);
  const std::string got{std::istreambuf_iterator<char>(in), {}};
  ASSERT_EQ(got.size(), total);
  EXPECT_EQ(got, pattern(0, total));
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(PendingFile, WrittenWindowsLeaveThePageCache) {
  const std::string dir = scratch().path().string();
  if (!pages_can_leave_memory(dir)) GTEST_SKIP() << dir << " is held in memory (tmpfs or ramfs)";
  const std::string path = (scratch().path() / "dropped.bin").string();
  const size_t window = PendingFile::kWritebackWindow;
  PendingFile file(path);
  for (int w = 0; w < 4; ++w) file.append(pattern(w * window, window));
  // Window 3 was just sent to the disk and window 2 waits its turn; 0 and 1 are on disk and dropped.
  const size_t pages = window / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_LE(resident_pages(file.temp_path(), 0, 2 * window), pages / 8);
  file.finish();
  EXPECT_LE(resident_pages(path, 0, 4 * window), pages / 8);
  std::ifstream in(path, std::ios::binary);
  const std::string got{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(got, pattern(0, 4 * window));  // read back from the disk
}

}  // namespace
}  // namespace luminamoon::durable
