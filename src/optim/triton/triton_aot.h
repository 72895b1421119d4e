// Triton AOT kernels (src/optim/triton/build_triton_aot.py) loaded and launched
// from C++: no Python and no Triton at run time.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optim/cuda/cuda_driver.h"
#include "optim/cuda/kernel_manifest.h"

namespace luminav::triton_aot {

// LUMINAV_TRITON_AOT_DIR when set, else luminav_triton_kernels beside the
// library that holds this code (where CMake installs them); "" when unknown.
// The CUDA manifest is DIR/cuda/manifest.json.
std::string kernel_directory();

// DIR/cuda's manifest parsed and checked (Triton version and scratch
// pointers, the kernel sets and the signatures this library packs:
// check_clm_kernel_set, check_tdclm_kernel_set, check_batch_kernel_set); false with `why` naming the directory and the
// problem. Reads no artifact, needs no GPU.
bool check_kernel_directory(const std::string& directory, cuda::KernelManifest* manifest, std::string* why);

// One loaded kernel: the manifest entry and the driver function of the best
// artifact for the device (Note [trailing scratch pointers] decides its ABI).
struct LoadedKernel {
  cuda::KernelEntry entry;
  std::string arch;  // the artifact that loaded ("sm_90", "compute_80")
  cuda::drv::CUfunction function = nullptr;
};

// Note [Triton AOT loading]: the manifest is parsed and checked against its
// triton_version (check_triton_manifest) before any image is read; each
// kernel's artifacts are tried best first (kernel_artifact_candidates), each
// one's size, sha256 and ELF header checked (verify_artifact) before the driver
// sees it. The modules live in the device's primary context, which is made
// current on the calling thread.
class CudaKernels {
 public:
  // Loads every kernel of `store` for device `ordinal`; false with `why`.
  static bool load(const cuda::CudaDriver& driver, const cuda::ArtifactStore& store, int ordinal,
                   CudaKernels* out, std::string* why);

  const LoadedKernel* find(std::string_view name) const;
  const std::vector<LoadedKernel>& kernels() const { return kernels_; }

  // Launches `name` on `grid_x` programs: `user_args` are the addresses of the
  // kernel's declared arguments in signature order; the trailing scratch
  // pointers are appended (pack_triton_abi_args).
  bool launch(std::string_view name, unsigned grid_x, std::span<void* const> user_args,
              cuda::drv::CUstream stream, std::string* why) const {
    return launch(name, grid_x, 1, user_args, stream, why);
  }
  // The same on grid_x x grid_y programs (tl.program_id(1): TD-CLM's column-sum chunks).
  bool launch(std::string_view name, unsigned grid_x, unsigned grid_y, std::span<void* const> user_args,
              cuda::drv::CUstream stream, std::string* why) const;

 private:
  const cuda::CudaDriver* driver_ = nullptr;
  std::vector<LoadedKernel> kernels_;
};

// The ROCm path: hipModuleLoadData / hipModuleGetFunction / hipModuleLaunchKernel
// resolved from libamdhip64 (LUMINAV_HIP_DRIVER overrides). No AMD GPU is
// reachable from this project's machines: the hsaco images and the manifest are
// checked in CI, the resolution is tested against a library that lacks HIP, and
// the launch itself has never run.
struct HipModuleApi {
  void* handle = nullptr;
  int (*hipModuleLoadData)(void** module, const void* image) = nullptr;
  int (*hipModuleGetFunction)(void** function, void* module, const char* name) = nullptr;
  int (*hipModuleLaunchKernel)(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                               void** extra) = nullptr;
};
// Opens `library` (or LUMINAV_HIP_DRIVER, or libamdhip64.so.7/.6 when null)
// and resolves the module API; false with `why` naming what is missing.
bool resolve_hip_module_api(const char* library, HipModuleApi* out, std::string* why);

// Loads the rocm manifest's hsaco for `gfx_arch` and launches kernel `name`
// with the packed Triton arguments (threads: the artifact's NUM_WARPS * 64).
bool hip_launch(const HipModuleApi& api, const cuda::ArtifactStore& store, std::string_view gfx_arch,
                std::string_view name, unsigned grid_x, std::span<void* const> user_args, void* stream,
                std::string* why);

}  // namespace luminav::triton_aot
