// Our own minimal declarations of the CUDA driver API: the library never
// includes cuda.h nor links libcuda; it resolves these with dlsym at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminav::cuda::drv {

// Note [driver ABI]: these mirror the driver API's C ABI (cuda.h), which is
// stable across releases: opaque handles are pointers, CUdevice is an int,
// CUdeviceptr is a 64-bit integer, CUresult an enum (int-sized). Only the
// values we use are named.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUkernel = struct CUkern_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;

// CUdevice_attribute values.
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

// CUpointer_attribute / CUmemorytype values.
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr unsigned CU_MEMORYTYPE_HOST = 1;
constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
constexpr unsigned CU_MEMORYTYPE_UNIFIED = 4;

// CUjit_option values used to get the PTX JIT's error log.
using CUjit_option = int;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// CUstreamCaptureStatus: CU_STREAM_CAPTURE_STATUS_NONE.
constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;

// CUDA_KERNEL_NODE_PARAMS_v2 (cuGraphAddKernelNode_v2 and
// cuGraphExecKernelNodeSetParams_v2 take it).
struct KernelNodeParams {
  CUfunction func;
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  void** params;
  void** extra;
  CUkernel kernel;    // unused: func is set
  CUcontext context;  // ignored when func is set
};

// Entry points, by the exported symbol each is resolved from (the _v2
// names where the driver has them: the unsuffixed symbols are the legacy
// 32-bit-size versions kept for old binaries).
struct Api {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);                // _v2
  CUresult (*cuCtxGetCurrent)(CUcontext* context);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxGetDevice)(CUdevice* device);
  CUresult (*cuCtxPushCurrent)(CUcontext context);                       // _v2
  CUresult (*cuCtxPopCurrent)(CUcontext* context);                       // _v2
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options,
                                 CUjit_option* options, void** values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z,
                             unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);                // _v2
  CUresult (*cuMemFree)(CUdeviceptr ptr);                                // _v2
  CUresult (*cuMemAllocHost)(void** ptr, size_t bytes);                  // _v2
  CUresult (*cuMemFreeHost)(void* ptr);
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);  // _v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);  // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned value, size_t count, CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr);

  // Optional (Note [cached step graph] in step_graph_cache.h): a driver
  // without them, or the test double, runs every step eagerly.
  CUresult (*cuStreamIsCapturing)(CUstream stream, int* status);
  CUresult (*cuGraphCreate)(CUgraph* graph, unsigned flags);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                   size_t num_dependencies, const KernelNodeParams* params);  // _v2
  CUresult (*cuGraphInstantiate)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);  // WithFlags
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                             const KernelNodeParams* params);  // _v2
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  bool has_graphs() const {
    return cuStreamIsCapturing && cuGraphCreate && cuGraphAddKernelNode && cuGraphInstantiate &&
           cuGraphExecKernelNodeSetParams && cuGraphLaunch && cuGraphExecDestroy && cuGraphDestroy;
  }
};

}  // namespace luminav::cuda::drv
