// Loads Triton AOT cubins/hsaco through the manifest and launches them with the Triton ABI.
#include "optim/triton/triton_aot.h"

#include <dlfcn.h>

#include <cstdlib>

#include "optim/cuda/triton_abi.h"
#include "optim/triton/triton_aot_batches.h"
#include "optim/triton/triton_aot_clm_step.h"
#include "optim/triton/triton_aot_tdclm_step.h"

namespace luminav::triton_aot {
namespace {

bool read_manifest(const cuda::ArtifactStore& store, cuda::KernelManifest* m, std::string* why) {
  std::string json;
  if (!store.manifest_json(&json, why)) return false;
  if (!cuda::parse_kernel_manifest(json, m, why)) return false;
  if (m->triton_version.empty()) {
    *why = store.describe() + ": manifest has no triton_version (not a Triton AOT manifest)";
    return false;
  }
  return cuda::check_triton_manifest(*m, why);
}

}  // namespace

std::string kernel_directory() {
  const char* env = std::getenv("LUMINAV_TRITON_AOT_DIR");
  if (env != nullptr && *env != '\0') return env;
  // Installed beside libluminav (CMake: LUMINA_INSTALL_LIBDIR/luminav_triton_kernels).
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&kernel_directory), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string library = info.dli_fname;
  const size_t slash = library.rfind('/');
  return (slash == std::string::npos ? std::string(".") : library.substr(0, slash)) + "/luminav_triton_kernels";
}

bool check_kernel_directory(const std::string& directory, cuda::KernelManifest* manifest, std::string* why) {
  const std::string where = "Triton AOT kernels in " + directory + "/cuda";
  if (directory.empty()) {
    *why = "no Triton AOT kernel directory (set LUMINAV_TRITON_AOT_DIR)";
    return false;
  }
  cuda::DirectoryArtifactStore store(directory + "/cuda");
  std::string reason;
  cuda::KernelManifest m;
  if (!read_manifest(store, &m, &reason)) {
    *why = where + ": " + reason + " (a build without LUMINA_TRITON_AOT, moved kernels or another Triton's)";
    return false;
  }
  if (m.platform != "cuda" || !check_clm_kernel_set(m, &reason) || !check_tdclm_kernel_set(m, &reason) ||
      !check_batch_kernel_set(m, &reason)) {
    *why = where + ": " + (m.platform != "cuda" ? "platform " + m.platform + ", not cuda" : reason);
    return false;
  }
  *manifest = std::move(m);
  return true;
}

bool CudaKernels::load(const cuda::CudaDriver& driver, const cuda::ArtifactStore& store, int ordinal,
                       CudaKernels* out, std::string* why) {
  if (!driver.usable()) {
    *why = driver.why_not();
    return false;
  }
  cuda::KernelManifest manifest;
  if (!read_manifest(store, &manifest, why)) return false;
  if (manifest.platform != "cuda") {
    *why = store.describe() + ": platform " + manifest.platform + ", not cuda";
    return false;
  }
  cuda::DeviceInfo info;
  if (!driver.device_info(ordinal, &info, why)) return false;
  const auto& api = driver.api();
  cuda::drv::CUdevice device = 0;
  cuda::drv::CUcontext context = nullptr;
  if (auto r = api.cuDeviceGet(&device, ordinal); r != cuda::drv::CUDA_SUCCESS) {
    *why = driver.error("cuDeviceGet", r);
    return false;
  }
  if (auto r = api.cuDevicePrimaryCtxRetain(&context, device); r != cuda::drv::CUDA_SUCCESS) {
    *why = driver.error("cuDevicePrimaryCtxRetain", r);
    return false;
  }
  if (auto r = api.cuCtxSetCurrent(context); r != cuda::drv::CUDA_SUCCESS) {
    *why = driver.error("cuCtxSetCurrent", r);
    return false;
  }
  const int cc = info.cc_major * 10 + info.cc_minor;
  CudaKernels loaded;
  loaded.driver_ = &driver;
  for (const cuda::KernelEntry& k : manifest.kernels) {
    LoadedKernel lk;
    lk.entry = k;
    std::string reasons;
    for (const cuda::ArtifactEntry* a : cuda::kernel_artifact_candidates(manifest, k.name, cc)) {
      std::vector<uint8_t> bytes;
      std::string reason;
      if (!store.read(a->file, &bytes, &reason) || !cuda::verify_artifact(*a, bytes, &reason)) {
        reasons += (reasons.empty() ? "" : "; ") + reason;
        continue;
      }
      if (a->kind == cuda::ArtifactKind::kPtx) bytes.push_back(0);  // the JIT reads a C string
      cuda::drv::CUmodule module = nullptr;
      if (auto r = api.cuModuleLoadDataEx(&module, bytes.data(), 0, nullptr, nullptr); r != cuda::drv::CUDA_SUCCESS) {
        reasons += (reasons.empty() ? "" : "; ") + driver.error("cuModuleLoadDataEx " + a->file, r);
        continue;
      }
      const std::string symbol = a->symbol.empty() ? k.name : a->symbol;
      if (auto r = api.cuModuleGetFunction(&lk.function, module, symbol.c_str()); r != cuda::drv::CUDA_SUCCESS) {
        reasons += (reasons.empty() ? "" : "; ") + driver.error("cuModuleGetFunction " + symbol, r);
        continue;
      }
      lk.arch = a->arch;
      break;
    }
    if (lk.function == nullptr) {
      *why = "kernel " + k.name + ": no artifact loads on " + info.arch() +
             (reasons.empty() ? " (none built for it)" : ": " + reasons);
      return false;
    }
    loaded.kernels_.push_back(std::move(lk));
  }
  *out = std::move(loaded);
  return true;
}

const LoadedKernel* CudaKernels::find(std::string_view name) const {
  for (const LoadedKernel& k : kernels_) {
    if (k.entry.name == name) return &k;
  }
  return nullptr;
}

bool CudaKernels::launch(std::string_view name, unsigned grid_x, unsigned grid_y, std::span<void* const> user_args,
                         cuda::drv::CUstream stream, std::string* why) const {
  const LoadedKernel* k = find(name);
  if (k == nullptr) {
    *why = "no Triton AOT kernel " + std::string(name);
    return false;
  }
  std::vector<void*> args = cuda::pack_triton_abi_args(user_args, k->entry.num_trailing_scratch_ptrs);
  if (auto r = driver_->api().cuLaunchKernel(k->function, grid_x, grid_y, 1, static_cast<unsigned>(k->entry.block_size),
                                             1, 1, static_cast<unsigned>(k->entry.shared_mem_bytes), stream,
                                             args.data(), nullptr);
      r != cuda::drv::CUDA_SUCCESS) {
    *why = driver_->error("cuLaunchKernel " + k->entry.name, r);
    return false;
  }
  return true;
}

bool resolve_hip_module_api(const char* library, HipModuleApi* out, std::string* why) {
  const char* override_path = std::getenv("LUMINAV_HIP_DRIVER");
  const char* const defaults[] = {"libamdhip64.so.7", "libamdhip64.so.6"};
  std::vector<const char*> tries;
  if (library != nullptr) tries.push_back(library);
  else if (override_path != nullptr && *override_path) tries.push_back(override_path);
  else tries.assign(std::begin(defaults), std::end(defaults));
  HipModuleApi api;
  std::string tried;
  for (const char* lib : tries) {
    api.handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (api.handle != nullptr) break;
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(lib) + ": " + (err ? err : "dlopen failed");
  }
  if (api.handle == nullptr) {
    *why = "no ROCm runtime (no AMD GPU driver on this machine): " + tried;
    return false;
  }
  api.hipModuleLoadData = reinterpret_cast<decltype(api.hipModuleLoadData)>(dlsym(api.handle, "hipModuleLoadData"));
  api.hipModuleGetFunction =
      reinterpret_cast<decltype(api.hipModuleGetFunction)>(dlsym(api.handle, "hipModuleGetFunction"));
  api.hipModuleLaunchKernel =
      reinterpret_cast<decltype(api.hipModuleLaunchKernel)>(dlsym(api.handle, "hipModuleLaunchKernel"));
  if (!api.hipModuleLoadData || !api.hipModuleGetFunction || !api.hipModuleLaunchKernel) {
    *why = "the ROCm runtime lacks hipModuleLoadData/hipModuleGetFunction/hipModuleLaunchKernel";
    return false;  // the handle stays open (closing runtimes is unsafe; it is small)
  }
  *out = api;
  return true;
}

bool hip_launch(const HipModuleApi& api, const cuda::ArtifactStore& store, std::string_view gfx_arch,
                std::string_view name, unsigned grid_x, std::span<void* const> user_args, void* stream,
                std::string* why) {
  cuda::KernelManifest manifest;
  if (!read_manifest(store, &manifest, why)) return false;
  const cuda::KernelEntry* k = manifest.find_kernel(name);
  const cuda::ArtifactEntry* artifact = nullptr;
  for (const cuda::ArtifactEntry& a : manifest.artifacts) {
    if (a.kernel == name && a.arch == gfx_arch && a.kind == cuda::ArtifactKind::kHsaco) artifact = &a;
  }
  if (k == nullptr || artifact == nullptr) {
    *why = "no hsaco of kernel " + std::string(name) + " for " + std::string(gfx_arch);
    return false;
  }
  std::vector<uint8_t> bytes;
  if (!store.read(artifact->file, &bytes, why) || !cuda::verify_artifact(*artifact, bytes, why)) return false;
  void* module = nullptr;
  void* function = nullptr;
  if (int e = api.hipModuleLoadData(&module, bytes.data()); e != 0) {
    *why = "hipModuleLoadData " + artifact->file + ": hipError " + std::to_string(e);
    return false;
  }
  if (int e = api.hipModuleGetFunction(&function, module, artifact->symbol.c_str()); e != 0) {
    *why = "hipModuleGetFunction " + artifact->symbol + ": hipError " + std::to_string(e);
    return false;
  }
  std::vector<void*> args = cuda::pack_triton_abi_args(user_args, k->num_trailing_scratch_ptrs);
  const unsigned threads = static_cast<unsigned>(k->block_size) * 2;  // 64-lane wavefronts
  if (int e = api.hipModuleLaunchKernel(function, grid_x, 1, 1, threads, 1, 1,
                                        static_cast<unsigned>(k->shared_mem_bytes), stream, args.data(), nullptr);
      e != 0) {
    *why = "hipModuleLaunchKernel " + artifact->symbol + ": hipError " + std::to_string(e);
    return false;
  }
  return true;
}

}  // namespace luminav::triton_aot
