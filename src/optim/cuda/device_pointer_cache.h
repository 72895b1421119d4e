// Whether an address is CUDA device memory, with the answers remembered (both CUDA-driver backends' check).
#pragma once

#include "optim/cuda/driver_api.h"

namespace luminav::cuda {

// Note [device pointer cache]: a driver query costs about a microsecond; two per tensor on every step of a
// 150-tensor model were most of the cuda backend's asynchronous step's host time, and the
// triton-aot backend's eager step in the Llama 98M loop queried 296 addresses before its first launch
// (session 35). Addresses once seen as device memory are remembered (a caching allocator hands the same ones
// out again); unified addressing keeps device and host ranges apart, so a remembered address is never an
// ordinary host pointer. The set is bounded and starts over. Thread-safe.
bool is_device_memory(const drv::Api& api, const void* p);

// The driver's answer, not remembered (Note [pointer routing] in cuda_backend.cc: which backend serves a
// pointer is asked of the driver each time).
bool query_device_memory(const drv::Api& api, const void* p);

}  // namespace luminav::cuda
