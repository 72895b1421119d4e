// Reads the kernel artifacts embedded in the library.
#include "optim/cuda/embedded_files.h"

#include <string>

namespace luminav::cuda {

bool EmbeddedArtifactStore::read(const std::string& file, std::vector<uint8_t>* bytes,
                                 std::string* why) const {
  for (const EmbeddedFile& f : embedded_cuda_files()) {
    if (file == f.name) {
      bytes->assign(f.begin, f.end);
      return true;
    }
  }
  const std::string note = embedded_cuda_build_note();
  *why = note.empty() ? file + " is not embedded in libluminav" : note;
  return false;
}

bool EmbeddedArtifactStore::manifest_json(std::string* json, std::string* why) const {
  std::vector<uint8_t> bytes;
  if (!read("manifest.json", &bytes, why)) return false;
  json->assign(bytes.begin(), bytes.end());
  return true;
}

const ArtifactStore& embedded_cuda_artifacts() {
  static const EmbeddedArtifactStore store;
  return store;
}

}  // namespace luminav::cuda
