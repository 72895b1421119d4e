// Tests of the recorded step (launch_script.h): what makes two steps the same
// graph (topology) and what makes them the same replay (arguments).
#include "optim/cuda/launch_script.h"

#include <gtest/gtest.h>

#include <cstring>

#include "optim/cuda/launch_params.h"

namespace luminav::cuda {
namespace {

drv::CUfunction fn(uintptr_t id) { return reinterpret_cast<drv::CUfunction>(id); }

struct Args {
  uint64_t pointer;
  float lr;
  uint32_t count;
};

LaunchScript two_kernels(uint64_t pointer, float lr, uint32_t blocks) {
  LaunchScript s;
  const Args prepare{0, lr, 1};
  const Args apply{pointer, 0.0f, 3};
  s.add_kernel(fn(0x10), 1, &prepare, sizeof prepare, 0);
  s.add_kernel(fn(0x20), blocks, &apply, sizeof apply, 2);
  return s;
}

TEST(LaunchScript, equal_steps_compare_equal) {
  EXPECT_TRUE(two_kernels(0x1000, 1e-3f, 8) == two_kernels(0x1000, 1e-3f, 8));
}

TEST(LaunchScript, a_changed_argument_keeps_the_topology_and_marks_only_its_launch) {
  const LaunchScript a = two_kernels(0x1000, 1e-3f, 8);
  const LaunchScript lr = two_kernels(0x1000, 5e-4f, 8);       // an LR scheduler's new host lr
  const LaunchScript moved = two_kernels(0x2000, 1e-3f, 8);    // a reallocated gradient
  EXPECT_FALSE(a == lr);
  EXPECT_TRUE(a.same_topology(lr));
  EXPECT_FALSE(lr.same_arguments(a, 0));
  EXPECT_TRUE(lr.same_arguments(a, 1));
  EXPECT_TRUE(moved.same_arguments(a, 0));
  EXPECT_FALSE(moved.same_arguments(a, 1));
}

TEST(LaunchScript, another_grid_kernel_or_count_is_another_topology) {
  const LaunchScript a = two_kernels(0x1000, 1e-3f, 8);
  EXPECT_FALSE(a.same_topology(two_kernels(0x1000, 1e-3f, 9)));  // a tensor grew
  LaunchScript other_kernel;
  const Args x{};
  other_kernel.add_kernel(fn(0x10), 1, &x, sizeof x, 0);
  other_kernel.add_kernel(fn(0x30), 8, &x, sizeof x, 2);
  EXPECT_FALSE(a.same_topology(other_kernel));
  LaunchScript fewer;
  fewer.add_kernel(fn(0x10), 1, &x, sizeof x, 0);
  EXPECT_FALSE(a.same_topology(fewer));
  EXPECT_FALSE(a.same_topology(LaunchScript{}));
}

TEST(LaunchScript, host_copies_are_part_of_equality) {
  LaunchScript a = two_kernels(0x1000, 1e-3f, 8);
  LaunchScript b = two_kernels(0x1000, 1e-3f, 8);
  int host_a = 0, host_b = 0;
  a.add_copy_to_host(&host_a, reinterpret_cast<void*>(0x4000), 4);
  EXPECT_FALSE(a == b);
  b.add_copy_to_host(&host_b, reinterpret_cast<void*>(0x4000), 4);
  EXPECT_FALSE(a == b);  // another host word
  EXPECT_TRUE(a.same_topology(b));
}

TEST(LaunchScript, a_node_carries_the_recorded_bytes_and_trailing_null_scratch) {
  const LaunchScript s = two_kernels(0xabc0, 2e-3f, 8);
  std::vector<void*> storage;
  const drv::KernelNodeParams p = s.node(1, &storage);
  EXPECT_EQ(p.func, fn(0x20));
  EXPECT_EQ(p.grid_x, 8u);
  EXPECT_EQ(p.block_x, static_cast<unsigned>(kBlockSize));
  EXPECT_EQ(p.grid_y * p.grid_z * p.block_y * p.block_z, 1u);
  ASSERT_EQ(storage.size(), 3u);  // the struct and Triton's two trailing pointers
  Args read{};
  std::memcpy(&read, p.params[0], sizeof read);
  EXPECT_EQ(read.pointer, 0xabc0u);
  EXPECT_EQ(read.count, 3u);
  EXPECT_EQ(*static_cast<const unsigned long long*>(p.params[1]), 0ull);
  EXPECT_EQ(*static_cast<const unsigned long long*>(p.params[2]), 0ull);
}

}  // namespace
}  // namespace luminav::cuda
