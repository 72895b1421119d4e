// The output block cache behind TextBatch's allocator (Note [output block
// cache]): a large block freed by one batch is handed to the next batch of a
// fitting size, an ill-fitting size is not, and a live batch's block is its own.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "luminamoon/text_batch.h"

namespace luminamoon {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

TEST(OutputBlockCache, AFreedLargeBlockIsReusedByTheNextBatchOfAFittingSize) {
  const void* first = nullptr;
  {
    ByteBuffer a(24 * kMiB);
    std::memset(a.data(), 0xAB, a.size());
    first = a.data();
  }
  ByteBuffer b(20 * kMiB);  // fits: 20 <= 24 <= 2 * 20
  EXPECT_EQ(static_cast<const void*>(b.data()), first);
  std::memset(b.data(), 0x11, b.size());
  EXPECT_EQ(b[0], 0x11);
  EXPECT_EQ(b[b.size() - 1], 0x11);
}

TEST(OutputBlockCache, ABlockMoreThanTwiceTheRequestIsNotSpentOnIt) {
  const void* big = nullptr;
  {
    ByteBuffer a(64 * kMiB);
    big = a.data();
  }
  ByteBuffer small(9 * kMiB);  // 64 > 2 * 9: a fresh block
  EXPECT_NE(static_cast<const void*>(small.data()), big);
  ByteBuffer fits(40 * kMiB);  // the 64 MiB block is still idle and fits 40
  EXPECT_EQ(static_cast<const void*>(fits.data()), big);
}

TEST(OutputBlockCache, BlocksOwnedByLiveBatchesAreNeverShared) {
  ByteBuffer a(16 * kMiB), b(16 * kMiB);
  EXPECT_NE(a.data(), b.data());
  TextBatch moved;
  moved.data = std::move(a);  // moving a batch moves its block, nothing is freed
  ByteBuffer c(16 * kMiB);
  EXPECT_NE(c.data(), moved.data.data());
  EXPECT_NE(c.data(), b.data());
}

}  // namespace
}  // namespace luminamoon
