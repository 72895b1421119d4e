// Tests of Triton's trailing scratch pointer packing (seed 003, 3.3 C).
#include "optim/cuda/triton_abi.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace luminav::cuda {
namespace {

TEST(TritonAbi, test_triton3_abi_trailing_scratch_pointer) {
  unsigned long long param = 0x1000, grad = 0x2000;
  float lr = 1e-3f;
  uint64_t step = 7;
  void* user[] = {&param, &grad, &lr, &step};

  // Triton 3.0-3.2: one trailing pointer (global_scratch).
  const auto one = pack_triton_abi_args(user, 1);
  ASSERT_EQ(one.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(one[i], user[i]);
  ASSERT_NE(one[4], nullptr);
  EXPECT_EQ(*static_cast<const unsigned long long*>(one[4]), 0ull);  // a null CUdeviceptr

  // Triton 3.3-3.8: two (global_scratch, profile_scratch), both the shared null.
  const auto two = pack_triton_abi_args(user, 2);
  ASSERT_EQ(two.size(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(two[i], user[i]);
  EXPECT_EQ(two[4], static_cast<const void*>(triton_null_scratch()));
  EXPECT_EQ(two[5], static_cast<const void*>(triton_null_scratch()));
  EXPECT_EQ(*static_cast<const unsigned long long*>(two[5]), 0ull);
  // The user arguments still read back as given.
  EXPECT_EQ(*static_cast<unsigned long long*>(two[1]), 0x2000ull);
  EXPECT_EQ(*static_cast<float*>(two[2]), 1e-3f);
}

TEST(TritonAbi, NoTrailingPointersAndOutOfRangeCounts) {
  int a = 1;
  void* user[] = {&a};
  const auto none = pack_triton_abi_args(user, 0);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0], &a);
  EXPECT_TRUE(pack_triton_abi_args(user, 3).empty());
  EXPECT_TRUE(pack_triton_abi_args(user, -1).empty());
  EXPECT_EQ(pack_triton_abi_args({}, 2).size(), 2u);
}

}  // namespace
}  // namespace luminav::cuda
