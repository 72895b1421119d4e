// Note [device pointer cache]: the driver is asked once per device address, every time for any other.
#include "optim/cuda/device_pointer_cache.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace luminav::cuda {
namespace {

// A driver whose memory-type query answers device for addresses below 0x1000'0000, unified for those below
// 0x2000'0000, host above, and fails (memory it never saw) at 0xdead'0000; it counts its calls.
int queries = 0;
drv::CUresult FakePointerGetAttribute(void* data, int attribute, drv::CUdeviceptr ptr) {
  ++queries;
  if (attribute != drv::CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return 1;
  if (ptr == 0xdead'0000u) return 1;  // CUDA_ERROR_INVALID_VALUE
  *static_cast<unsigned*>(data) = ptr < 0x1000'0000u   ? drv::CU_MEMORYTYPE_DEVICE
                                  : ptr < 0x2000'0000u ? drv::CU_MEMORYTYPE_UNIFIED
                                                       : drv::CU_MEMORYTYPE_HOST;
  return drv::CUDA_SUCCESS;
}

drv::Api FakeApi() {
  drv::Api api{};
  api.cuPointerGetAttribute = FakePointerGetAttribute;
  return api;
}

const void* At(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(DevicePointerCache, DeviceAndManagedAddressesAreAskedOnceOthersEveryTime) {
  const drv::Api api = FakeApi();
  queries = 0;
  EXPECT_TRUE(is_device_memory(api, At(0x0800'1000u)));
  EXPECT_TRUE(is_device_memory(api, At(0x0800'1000u)));
  EXPECT_TRUE(is_device_memory(api, At(0x1800'2000u)));  // managed memory: served in place
  EXPECT_TRUE(is_device_memory(api, At(0x1800'2000u)));
  EXPECT_EQ(queries, 2);
  EXPECT_FALSE(is_device_memory(api, At(0x3000'0000u)));  // pinned host memory
  EXPECT_FALSE(is_device_memory(api, At(0x3000'0000u)));
  EXPECT_FALSE(is_device_memory(api, At(0xdead'0000u)));  // the driver never saw it (malloc)
  EXPECT_FALSE(is_device_memory(api, At(0xdead'0000u)));
  EXPECT_EQ(queries, 6);
}

TEST(DevicePointerCache, TheUncachedQueryAsksTheDriverEachTime) {
  const drv::Api api = FakeApi();
  queries = 0;
  EXPECT_TRUE(query_device_memory(api, At(0x0900'0000u)));
  EXPECT_TRUE(query_device_memory(api, At(0x0900'0000u)));
  EXPECT_FALSE(query_device_memory(api, At(0x3100'0000u)));
  EXPECT_EQ(queries, 3);
}

}  // namespace
}  // namespace luminav::cuda
