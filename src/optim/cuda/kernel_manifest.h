// manifest.json of the AOT kernels: parsing, artifact choice and verification.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optim/cuda/artifact_check.h"

namespace luminav::cuda {

// One compiled artifact: every kernel of the manifest for one architecture.
struct ArtifactEntry {
  std::string arch;    // "sm_90" (cubin), "compute_90" (PTX), "gfx942" (hsaco)
  ArtifactKind kind = ArtifactKind::kCubin;
  std::string file;    // relative to the manifest's directory
  uint64_t size = 0;
  std::string sha256;  // 64 lowercase hex digits
  // Triton AOT (one kernel per module): the manifest kernel this file holds and
  // its entry symbol. Empty for the nvcc artifacts, which hold every kernel.
  std::string kernel;
  std::string symbol;
  // Compute capability as major*10+minor for sm_/compute_ archs, else -1.
  int compute_capability() const;
};

// One kernel entry point and how to launch it.
struct KernelEntry {
  std::string name;        // the extern "C" symbol
  std::string signature;   // e.g. "(ApplyLaunch:3968)": parameter types and sizes
  int num_trailing_scratch_ptrs = 0;  // Triton ABI (Note [trailing scratch pointers])
  int block_size = 0;      // threads per block the kernel is compiled for
  int shared_mem_bytes = 0;  // dynamic shared memory per launch
  // Triton AOT (optional field): elements one program handles, which fixes the
  // grid (0: the kernel runs as one program, or the manifest does not say).
  uint64_t elements_per_program = 0;
};

struct KernelManifest {
  std::string platform;  // "cuda" or "rocm"
  std::string triton_version;  // Triton AOT kernels: the compiler that built them ("" for nvcc)
  std::vector<ArtifactEntry> artifacts;
  std::vector<KernelEntry> kernels;
  const KernelEntry* find_kernel(std::string_view name) const;
};

// Parses manifest.json. Every field is required; unknown fields are ignored.
// False with `why` naming the entry and field on the first problem.
bool parse_kernel_manifest(std::string_view json, KernelManifest* out, std::string* why);

// Artifacts to try for a device of compute capability `cc` (major*10+minor),
// best first: the cubin of the same major with the highest minor <= the
// device's, then the PTX of the highest capability <= the device's (which
// the driver compiles for newer devices).
std::vector<const ArtifactEntry*> artifact_candidates(const KernelManifest& manifest, int cc);

// The same for the artifacts of one kernel of a Triton AOT manifest (ArtifactEntry::kernel).
std::vector<const ArtifactEntry*> kernel_artifact_candidates(const KernelManifest& manifest,
                                                             std::string_view kernel, int cc);

// Trailing scratch pointers of the kernels a Triton version emits (Note [trailing
// scratch pointers]): 0 up to 3.2, 1 for 3.3-3.4, 2 from 3.5; -1 for an unreadable version.
int triton_trailing_scratch_ptrs(std::string_view triton_version);

// A Triton AOT manifest's kernels against its triton_version: each declares the
// version's trailing scratch pointers and every kernel has an artifact. False
// with `why` naming the kernel, the count it declares and the count expected.
bool check_triton_manifest(const KernelManifest& manifest, std::string* why);

// Size, sha256 and format checks of `bytes` against `entry`.
bool verify_artifact(const ArtifactEntry& entry, std::span<const uint8_t> bytes, std::string* why);

// Where a manifest and its artifacts come from.
class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;
  virtual std::string describe() const = 0;  // for messages
  virtual bool manifest_json(std::string* json, std::string* why) const = 0;
  // Reads `file`; false with `why` when it is missing or unreadable.
  virtual bool read(const std::string& file, std::vector<uint8_t>* bytes, std::string* why) const = 0;
};

// The artifacts compiled into the library (empty when built without nvcc).
const ArtifactStore& embedded_cuda_artifacts();
// A directory holding manifest.json and the files it names.
class DirectoryArtifactStore final : public ArtifactStore {
 public:
  explicit DirectoryArtifactStore(std::string directory) : directory_(std::move(directory)) {}
  std::string describe() const override { return "kernel directory " + directory_; }
  bool manifest_json(std::string* json, std::string* why) const override;
  bool read(const std::string& file, std::vector<uint8_t>* bytes, std::string* why) const override;

 private:
  std::string directory_;
};

}  // namespace luminav::cuda
