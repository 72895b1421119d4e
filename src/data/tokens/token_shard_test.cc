// TokenShardWriter and export_megatron: layout read back by hand, error paths.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "data/state/durable_io.h"
#include "luminamoon/data_error.h"
#include "luminamoon/token_shards.h"

namespace luminamoon {
namespace {

namespace fs = std::filesystem;

template <class T>
T at(const std::string& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

fs::path fresh_dir(const char* name) {
  fs::path d = fs::temp_directory_path() / (std::string("lm_tokens_") + name + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(TokenShardWriter, LayoutReadsBackByHand) {
  fs::path d = fresh_dir("layout");
  TokenShardWriter w(d.string(), {});
  std::vector<uint32_t> tokens = {5, 6, 7, 65535, 1};
  std::vector<uint64_t> lens = {3, 2};
  w.add_documents(tokens, lens);
  TokenShardInfo info = w.write_shard();
  std::string b = durable::read_file((d / "shard-00000000.tok").string());
  ASSERT_EQ(b.size(), info.bytes);
  EXPECT_EQ(std::string(b.data(), 7), "LMTOKSH");
  EXPECT_EQ(at<uint32_t>(b, 12), 2u);
  EXPECT_EQ(at<uint64_t>(b, 16), 2u);
  EXPECT_EQ(at<uint64_t>(b, 24), 5u);
  const uint64_t off = at<uint64_t>(b, 40);
  EXPECT_EQ(off, 80u);  // 64 + 10 bytes of tokens, padded to 8
  EXPECT_EQ(at<uint16_t>(b, 64 + 6), 65535);
  EXPECT_EQ(at<uint64_t>(b, off + 8), 3u);
  EXPECT_EQ(at<uint64_t>(b, off + 16), 5u);
  uint32_t crc = static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(b.data()) + 64, b.size() - 64));
  EXPECT_EQ(at<uint32_t>(b, 48), crc);
  EXPECT_TRUE(fs::exists(d / "manifest.json"));
  fs::remove_all(d);
}

TEST(TokenShardWriter, RejectsBadInputWithoutWriting) {
  fs::path d = fresh_dir("bad");
  TokenShardWriter w(d.string(), {});
  std::vector<uint32_t> big = {70000};
  std::vector<uint64_t> one = {1};
  EXPECT_THROW(w.add_documents(big, one), DataError);
  std::vector<uint32_t> two = {1, 2};
  EXPECT_THROW(w.add_documents(two, one), DataError);
  EXPECT_TRUE(w.shard_empty());
  EXPECT_THROW(w.write_shard(), DataError);
  EXPECT_THROW(TokenShardWriter(d.string(), TokenShardOptions{3}), DataError);
  fs::remove_all(d);
}

TEST(TokenShardWriter, DiscardUncommittedKeepsTheCheckpointedShards) {
  fs::path d = fresh_dir("discard");
  {
    TokenShardWriter w(d.string(), {});
    std::vector<uint32_t> t = {1, 2, 3};
    std::vector<uint64_t> l = {3};
    for (int i = 0; i < 3; ++i) {
      w.add_documents(t, l);
      w.write_shard();
    }
    w.add_documents(t, l);  // left as shard-00000003.tok.tmp by a "crash"
  }
  durable::write_file((d / "shard-00000003.tok.tmp").string(), "torn");
  TokenShardWriter w(d.string(), {});
  w.discard_uncommitted(2);
  EXPECT_EQ(w.committed().size(), 2u);
  EXPECT_TRUE(fs::exists(d / "shard-00000001.tok"));
  EXPECT_FALSE(fs::exists(d / "shard-00000002.tok"));
  EXPECT_FALSE(fs::exists(d / "shard-00000003.tok.tmp"));
  // A damaged committed shard is an error, never a silent restart.
  durable::write_file((d / "shard-00000001.tok").string(), std::string(100, 'x'));
  EXPECT_THROW(w.discard_uncommitted(2), DataError);
  fs::remove_all(d);
}

TEST(ExportMegatron, IndexFieldsByHand) {
  fs::path d = fresh_dir("megatron");
  TokenShardWriter w(d.string(), {});
  std::vector<uint32_t> t = {9, 8, 7, 6};
  std::vector<uint64_t> l = {1, 3};
  w.add_documents(t, l);
  w.write_shard();
  EXPECT_EQ(export_megatron({(d / "shard-00000000.tok").string()}, (d / "m").string()), 2u);
  std::string idx = durable::read_file((d / "m.idx").string());
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(at<uint64_t>(idx, 9), 1u);
  EXPECT_EQ(idx[17], 8);  // uint16
  EXPECT_EQ(at<uint64_t>(idx, 18), 2u);
  EXPECT_EQ(at<int32_t>(idx, 34), 1);
  EXPECT_EQ(at<int32_t>(idx, 38), 3);
  EXPECT_EQ(at<int64_t>(idx, 42 + 8), 2);  // the second document starts at byte 2
  EXPECT_EQ(durable::read_file((d / "m.bin").string()).size(), 8u);
  fs::remove_all(d);
}

}  // namespace
}  // namespace luminamoon
