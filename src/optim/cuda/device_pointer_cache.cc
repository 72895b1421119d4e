#include "optim/cuda/device_pointer_cache.h"

#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace luminav::cuda {

bool query_device_memory(const drv::Api& api, const void* p) {
  unsigned memory_type = 0;
  const drv::CUresult r = api.cuPointerGetAttribute(&memory_type, drv::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                    reinterpret_cast<drv::CUdeviceptr>(p));
  return r == drv::CUDA_SUCCESS &&
         (memory_type == drv::CU_MEMORYTYPE_DEVICE || memory_type == drv::CU_MEMORYTYPE_UNIFIED);
}

bool is_device_memory(const drv::Api& api, const void* p) {
  static std::mutex mutex;
  static std::unordered_set<uintptr_t> known;
  const auto address = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard lock(mutex);
    if (known.count(address) != 0) return true;
  }
  if (!query_device_memory(api, p)) return false;
  std::lock_guard lock(mutex);
  if (known.size() >= (1u << 16)) known.clear();
  known.insert(address);
  return true;
}

}  // namespace luminav::cuda
