// The counter-based hash of stochastic rounding against known answers
// computed independently with Python integers.
#include "optim/core/stochastic_hash.h"

#include <gtest/gtest.h>

namespace luminav::core {
namespace {

// Produced by (Python 3, arbitrary-precision integers, mask 2^64 - 1):
//   M=(1<<64)-1
//   def h(s,t,i):
//       z=(s*0x9E3779B97F4A7C15+t*0xBF58476D1CE4E5B9+i*0x94D049BB133111EB)&M
//       z^=z>>30; z=(z*0xBF58476D1CE4E5B9)&M
//       z^=z>>27; z=(z*0x94D049BB133111EB)&M
//       z^=z>>31
//       return z>>32
//   for a in [(0,0,0),(0,1,0),(1,1,1),(42,7,123456),(M,1,5),
//             (12345,100000,(1<<40)+3),(7,3,M)]: print(a, hex(h(*a)))
TEST(StochasticHash, KnownAnswers) {
  EXPECT_EQ(rounding_bits(0, 0, 0), 0x0u);
  EXPECT_EQ(rounding_bits(0, 1, 0), 0xf2fea582u);
  EXPECT_EQ(rounding_bits(1, 1, 1), 0x2f2a4588u);
  EXPECT_EQ(rounding_bits(42, 7, 123456), 0x495b5b8au);
  EXPECT_EQ(rounding_bits(0xFFFFFFFFFFFFFFFFull, 1, 5), 0x5efe7845u);
  EXPECT_EQ(rounding_bits(12345, 100000, (1ull << 40) + 3), 0x713b2cf2u);
  EXPECT_EQ(rounding_bits(7, 3, 0xFFFFFFFFFFFFFFFFull), 0xeb4ab5f4u);
}

// The bits depend on the three keys only: equal keys, equal bits; each key
// changes them.
TEST(StochasticHash, KeyedOnSeedStepIndex) {
  EXPECT_EQ(rounding_bits(5, 6, 7), rounding_bits(5, 6, 7));
  EXPECT_NE(rounding_bits(5, 6, 7), rounding_bits(6, 6, 7));
  EXPECT_NE(rounding_bits(5, 6, 7), rounding_bits(5, 7, 7));
  EXPECT_NE(rounding_bits(5, 6, 7), rounding_bits(5, 6, 8));
}

}  // namespace
}  // namespace luminav::core
