// Opens libcuda.so.1 with dlopen and resolves the driver entry points.
#include "optim/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace luminav::cuda {

std::string DeviceInfo::arch() const {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

namespace {

// Resolves `symbol` into `slot`; records the first missing name.
template <class Fn>
void resolve(void* handle, const char* symbol, Fn*& slot, std::string* missing) {
  slot = reinterpret_cast<Fn*>(dlsym(handle, symbol));
  if (slot == nullptr && missing->empty()) *missing = symbol;
}

}  // namespace

CudaDriver::CudaDriver(CudaDriver&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      api_(other.api_),
      usable_(other.usable_),
      why_not_(std::move(other.why_not_)),
      driver_version_(other.driver_version_),
      device_count_(other.device_count_) {}

CudaDriver::~CudaDriver() {
  // The process-wide driver lives until exit; closing it then could run after
  // the driver's own teardown, so handles are intentionally not dlclose'd.
}

const CudaDriver& CudaDriver::instance() {
  static const CudaDriver driver = [] {
    const char* override_path = std::getenv("LUMINAV_CUDA_DRIVER");
    return load(override_path != nullptr && *override_path ? override_path : "libcuda.so.1");
  }();
  return driver;
}

CudaDriver CudaDriver::load(const char* library) {
  CudaDriver d;
  d.handle_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (d.handle_ == nullptr) {
    const char* err = dlerror();
    d.why_not_ = std::string("no CUDA driver: dlopen(") + library + ") failed: " +
                 (err != nullptr ? err : "unknown error");
    return d;
  }
  std::string missing;
  drv::Api& a = d.api_;
  resolve(d.handle_, "cuInit", a.cuInit, &missing);
  resolve(d.handle_, "cuDriverGetVersion", a.cuDriverGetVersion, &missing);
  resolve(d.handle_, "cuGetErrorName", a.cuGetErrorName, &missing);
  resolve(d.handle_, "cuGetErrorString", a.cuGetErrorString, &missing);
  resolve(d.handle_, "cuDeviceGetCount", a.cuDeviceGetCount, &missing);
  resolve(d.handle_, "cuDeviceGet", a.cuDeviceGet, &missing);
  resolve(d.handle_, "cuDeviceGetName", a.cuDeviceGetName, &missing);
  resolve(d.handle_, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, &missing);
  resolve(d.handle_, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, &missing);
  resolve(d.handle_, "cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease, &missing);
  resolve(d.handle_, "cuCtxGetCurrent", a.cuCtxGetCurrent, &missing);
  resolve(d.handle_, "cuCtxSetCurrent", a.cuCtxSetCurrent, &missing);
  resolve(d.handle_, "cuCtxGetDevice", a.cuCtxGetDevice, &missing);
  resolve(d.handle_, "cuCtxPushCurrent_v2", a.cuCtxPushCurrent, &missing);
  resolve(d.handle_, "cuCtxPopCurrent_v2", a.cuCtxPopCurrent, &missing);
  resolve(d.handle_, "cuModuleLoadDataEx", a.cuModuleLoadDataEx, &missing);
  resolve(d.handle_, "cuModuleUnload", a.cuModuleUnload, &missing);
  resolve(d.handle_, "cuModuleGetFunction", a.cuModuleGetFunction, &missing);
  resolve(d.handle_, "cuLaunchKernel", a.cuLaunchKernel, &missing);
  resolve(d.handle_, "cuMemAlloc_v2", a.cuMemAlloc, &missing);
  resolve(d.handle_, "cuMemFree_v2", a.cuMemFree, &missing);
  resolve(d.handle_, "cuMemAllocHost_v2", a.cuMemAllocHost, &missing);
  resolve(d.handle_, "cuMemFreeHost", a.cuMemFreeHost, &missing);
  resolve(d.handle_, "cuMemcpyDtoHAsync_v2", a.cuMemcpyDtoHAsync, &missing);
  resolve(d.handle_, "cuMemcpyHtoDAsync_v2", a.cuMemcpyHtoDAsync, &missing);
  resolve(d.handle_, "cuMemsetD8Async", a.cuMemsetD8Async, &missing);
  resolve(d.handle_, "cuMemsetD32Async", a.cuMemsetD32Async, &missing);
  resolve(d.handle_, "cuStreamSynchronize", a.cuStreamSynchronize, &missing);
  resolve(d.handle_, "cuPointerGetAttribute", a.cuPointerGetAttribute, &missing);
  if (!missing.empty()) {
    d.why_not_ = std::string("no CUDA driver: ") + library + " lacks the entry point " + missing;
    return d;
  }
  std::string optional;  // a missing one leaves its slot null (Api::has_graphs)
  resolve(d.handle_, "cuStreamIsCapturing", a.cuStreamIsCapturing, &optional);
  resolve(d.handle_, "cuGraphCreate", a.cuGraphCreate, &optional);
  resolve(d.handle_, "cuGraphAddKernelNode_v2", a.cuGraphAddKernelNode, &optional);
  resolve(d.handle_, "cuGraphInstantiateWithFlags", a.cuGraphInstantiate, &optional);
  resolve(d.handle_, "cuGraphExecKernelNodeSetParams_v2", a.cuGraphExecKernelNodeSetParams, &optional);
  resolve(d.handle_, "cuGraphLaunch", a.cuGraphLaunch, &optional);
  resolve(d.handle_, "cuGraphExecDestroy", a.cuGraphExecDestroy, &optional);
  resolve(d.handle_, "cuGraphDestroy", a.cuGraphDestroy, &optional);
  drv::CUresult r = a.cuInit(0);
  if (r != drv::CUDA_SUCCESS) {
    d.why_not_ = "CUDA driver present but unusable: " + d.error("cuInit", r);
    return d;
  }
  a.cuDriverGetVersion(&d.driver_version_);
  r = a.cuDeviceGetCount(&d.device_count_);
  if (r != drv::CUDA_SUCCESS) {
    d.why_not_ = "CUDA driver present but unusable: " + d.error("cuDeviceGetCount", r);
    return d;
  }
  if (d.device_count_ <= 0) {
    d.why_not_ = "CUDA driver present but it reports no device";
    return d;
  }
  d.usable_ = true;
  return d;
}

bool CudaDriver::stream_capturing(drv::CUstream stream) const {
  if (api_.cuStreamIsCapturing == nullptr) return false;
  int status = drv::CU_STREAM_CAPTURE_STATUS_NONE;
  return api_.cuStreamIsCapturing(stream, &status) != drv::CUDA_SUCCESS || status != drv::CU_STREAM_CAPTURE_STATUS_NONE;
}

std::string CudaDriver::error(std::string_view operation, drv::CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName != nullptr) api_.cuGetErrorName(result, &name);
  if (api_.cuGetErrorString != nullptr) api_.cuGetErrorString(result, &text);
  std::string out = "[";
  out.append(operation);
  out += "][";
  out += name != nullptr ? name : "CUDA_ERROR_" + std::to_string(result);
  out += "] ";
  out += text != nullptr ? text : "unknown driver error";
  return out;
}

bool CudaDriver::device_info(int ordinal, DeviceInfo* info, std::string* why) const {
  if (!usable_) {
    *why = why_not_;
    return false;
  }
  drv::CUdevice device = 0;
  drv::CUresult r = api_.cuDeviceGet(&device, ordinal);
  if (r != drv::CUDA_SUCCESS) {
    *why = error("cuDeviceGet", r);
    return false;
  }
  info->ordinal = ordinal;
  char name[256] = {};
  if ((r = api_.cuDeviceGetName(name, sizeof name - 1, device)) != drv::CUDA_SUCCESS ||
      (r = api_.cuDeviceGetAttribute(&info->cc_major,
                                     drv::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)) !=
          drv::CUDA_SUCCESS ||
      (r = api_.cuDeviceGetAttribute(&info->cc_minor,
                                     drv::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)) !=
          drv::CUDA_SUCCESS ||
      (r = api_.cuDeviceGetAttribute(&info->multiprocessors,
                                     drv::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device)) !=
          drv::CUDA_SUCCESS) {
    *why = error("cuDeviceGetAttribute", r);
    return false;
  }
  info->name = name;
  return true;
}

std::string driver_older_than(int version, int required, std::string_view needed_for) {
  if (version >= required) return "";
  const auto dotted = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "the CUDA driver supports CUDA " + dotted(version) + "; " + std::string(needed_for) + " needs CUDA " +
         dotted(required) + " or later: update the NVIDIA driver";
}

}  // namespace luminav::cuda
