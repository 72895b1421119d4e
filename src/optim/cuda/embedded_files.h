// The kernel artifacts compiled into the library (see CMakeLists.txt).
#pragma once

#include <cstdint>
#include <span>

#include "optim/cuda/kernel_manifest.h"

namespace luminav::cuda {

struct EmbeddedFile {
  const char* name;
  const uint8_t* begin;
  const uint8_t* end;
};

// Defined in the generated embedded_cuda_files.cc.
std::span<const EmbeddedFile> embedded_cuda_files();
// Why there are no kernels ("" when there are).
const char* embedded_cuda_build_note();

// The embedded files as an ArtifactStore.
class EmbeddedArtifactStore final : public ArtifactStore {
 public:
  std::string describe() const override { return "the kernels embedded in libluminav"; }
  bool manifest_json(std::string* json, std::string* why) const override;
  bool read(const std::string& file, std::vector<uint8_t>* bytes, std::string* why) const override;
};

}  // namespace luminav::cuda
