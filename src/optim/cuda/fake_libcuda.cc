// Test double of libcuda.so.1: every entry point CudaDriver resolves, with a
// cuInit that reports "no device", so the fallback path runs without a GPU.
#include <cstddef>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {
constexpr int kNoDevice = 100;  // CUDA_ERROR_NO_DEVICE
constexpr int kNotInitialized = 3;
}  // namespace

FAKE_API int cuInit(unsigned) { return kNoDevice; }
FAKE_API int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
FAKE_API int cuGetErrorName(int e, const char** name) {
  *name = e == kNoDevice ? "CUDA_ERROR_NO_DEVICE" : e == kNotInitialized ? "CUDA_ERROR_NOT_INITIALIZED" : nullptr;
  return *name ? 0 : 1;
}
FAKE_API int cuGetErrorString(int e, const char** text) {
  *text = e == kNoDevice ? "no CUDA-capable device is detected"
          : e == kNotInitialized ? "initialization error" : nullptr;
  return *text ? 0 : 1;
}
#define FAKE_FAILS(name) FAKE_API int name() { return kNotInitialized; }
FAKE_FAILS(cuDeviceGetCount)
FAKE_FAILS(cuDeviceGet)
FAKE_FAILS(cuDeviceGetName)
FAKE_FAILS(cuDeviceGetAttribute)
FAKE_FAILS(cuDevicePrimaryCtxRetain)
FAKE_FAILS(cuDevicePrimaryCtxRelease_v2)
FAKE_FAILS(cuCtxGetCurrent)
FAKE_FAILS(cuCtxSetCurrent)
FAKE_FAILS(cuCtxGetDevice)
FAKE_FAILS(cuCtxPushCurrent_v2)
FAKE_FAILS(cuCtxPopCurrent_v2)
FAKE_FAILS(cuModuleLoadDataEx)
FAKE_FAILS(cuModuleUnload)
FAKE_FAILS(cuModuleGetFunction)
FAKE_FAILS(cuLaunchKernel)
FAKE_FAILS(cuMemAlloc_v2)
FAKE_FAILS(cuMemFree_v2)
FAKE_FAILS(cuMemAllocHost_v2)
FAKE_FAILS(cuMemFreeHost)
FAKE_FAILS(cuMemcpyDtoHAsync_v2)
FAKE_FAILS(cuMemcpyHtoDAsync_v2)
FAKE_FAILS(cuMemsetD8Async)
FAKE_FAILS(cuMemsetD32Async)
FAKE_FAILS(cuStreamSynchronize)
FAKE_FAILS(cuPointerGetAttribute)
FAKE_FAILS(cuStreamIsCapturing)  // optional: the graph entry points stay missing (Api::has_graphs)
