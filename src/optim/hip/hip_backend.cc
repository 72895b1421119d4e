// The ROCm backend: the driver probe and hsaco checks; it never claims to run
// (this build carries no hsaco kernels) and says exactly why.
#include <cstdlib>
#include <memory>

#include "optim/cuda/kernel_manifest.h"
#include "optim/dispatch/backend.h"
#include "optim/dispatch/backend_error.h"
#include "optim/dispatch/backend_factories.h"
#include "optim/hip/hip_driver.h"

namespace luminav {
namespace hip {
namespace {

// Checks the hsaco artifacts of LUMINAV_HIP_KERNEL_DIR (manifest.json with
// platform "rocm"): sizes, sha256, ELF EM_AMDGPU, stubs. "" when all pass.
std::string check_hip_kernel_dir(const char* dir) {
  const cuda::DirectoryArtifactStore store(dir);
  std::string json, why;
  cuda::KernelManifest manifest;
  if (!store.manifest_json(&json, &why) || !cuda::parse_kernel_manifest(json, &manifest, &why)) return why;
  if (manifest.platform != "rocm") return store.describe() + ": manifest platform is not rocm";
  for (const cuda::ArtifactEntry& entry : manifest.artifacts) {
    std::vector<uint8_t> bytes;
    if (entry.kind != cuda::ArtifactKind::kHsaco) return entry.file + ": not an hsaco artifact";
    if (!store.read(entry.file, &bytes, &why) || !cuda::verify_artifact(entry, bytes, &why)) return why;
  }
  return {};
}

class HipBackend final : public Backend {
 public:
  std::string_view name() const override { return "hip"; }
  int device_type() const override { return LUMINAV_DEVICE_ROCM; }

  bool available(std::string* why_not) const override {
    const HipProbe& p = hip_probe();
    if (!p.why_not.empty()) {
      *why_not = p.why_not;
      return false;
    }
    std::string kernels = "this build has no hsaco kernels (no hipcc at build time)";
    if (const char* dir = std::getenv("LUMINAV_HIP_KERNEL_DIR"); dir != nullptr && *dir) {
      const std::string problem = check_hip_kernel_dir(dir);
      kernels = problem.empty() ? std::string("the hsaco kernels of ") + dir +
                                      " pass their checks, but this build has no HIP launcher for them"
                                : problem;
    }
    *why_not = "ROCm driver " + p.library + " found with " + std::to_string(p.device_count) +
               " device(s) (" + p.device_name + "), but " + kernels;
    return false;
  }

  int reduce(const core::StepConstants&, std::span<const luminav_tensor>, int,
             std::span<const core::TensorGlobals>, std::span<luminav_partials>,
             const ExecContext&) override {
    return unavailable();
  }
  int apply(const core::StepConstants&, std::span<const luminav_tensor>,
            std::span<const core::TensorGlobals>, const ExecContext&) override {
    return unavailable();
  }
  int load_scalar(const float*, float*, const ExecContext&) override { return unavailable(); }

 private:
  int unavailable() const {
    std::string why;
    available(&why);
    set_backend_error("hip backend unavailable: " + why);
    return LUMINAV_STATUS_BACKEND_UNAVAILABLE;
  }
};

}  // namespace
}  // namespace hip

std::unique_ptr<Backend> make_hip_backend() { return std::make_unique<hip::HipBackend>(); }

}  // namespace luminav
