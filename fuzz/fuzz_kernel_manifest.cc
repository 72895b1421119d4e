// Fuzz target: the kernel manifest parser and the artifact checks (ELF
// headers, stub magic, PTX text) never read out of bounds or crash on any
// bytes; a manifest that parses gives candidates within its own artifacts.
#include <span>
#include <string>

#include "fuzz/fuzz_support.h"
#include "optim/cuda/artifact_check.h"
#include "optim/cuda/kernel_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminav::cuda;
  std::span<const uint8_t> bytes(data, size);
  std::string why;
  for (ArtifactKind kind : {ArtifactKind::kCubin, ArtifactKind::kPtx, ArtifactKind::kHsaco}) {
    why.clear();
    if (!check_artifact(bytes, kind, "fuzz", &why)) LUMINA_FUZZ_CHECK(!why.empty());
  }
  KernelManifest manifest;
  why.clear();
  std::string_view json(reinterpret_cast<const char*>(data), size);
  if (!parse_kernel_manifest(json, &manifest, &why)) {
    LUMINA_FUZZ_CHECK(!why.empty());
    return 0;
  }
  for (int cc : {-1, 0, 35, 70, 80, 86, 90, 100, 120}) {
    for (const ArtifactEntry* entry : artifact_candidates(manifest, cc)) {
      LUMINA_FUZZ_CHECK(entry >= manifest.artifacts.data() &&
                        entry < manifest.artifacts.data() + manifest.artifacts.size());
      why.clear();
      if (!verify_artifact(*entry, bytes, &why)) LUMINA_FUZZ_CHECK(!why.empty());
    }
  }
  for (const KernelEntry& k : manifest.kernels) LUMINA_FUZZ_CHECK(manifest.find_kernel(k.name) != nullptr);
  return 0;
}
