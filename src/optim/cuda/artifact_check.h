// Checks a GPU kernel artifact (cubin, PTX, hsaco) before a driver sees it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace luminav::cuda {

// Seed 000: synthetic stand-ins for compiled kernels start with these bytes.
inline constexpr std::string_view kCudaStubMagic = "// LUMINAV_TRITON_AOT_CUBIN";
inline constexpr std::string_view kRocmStubMagic = "; LUMINAV_TRITON_AOT_HSACO";

// ELF machine numbers of GPU code objects.
inline constexpr uint16_t kElfMachineCuda = 190;    // EM_CUDA
inline constexpr uint16_t kElfMachineAmdgpu = 224;  // EM_AMDGPU

enum class ArtifactKind { kCubin, kPtx, kHsaco };

// "cubin", "ptx", "hsaco".
std::string_view artifact_kind_name(ArtifactKind kind);

// Note [artifact checks]: a driver handed a malformed image may crash the
// process or poison the context, so every image is checked first: stubs are
// refused by name; cubins and hsaco must be little-endian ELF64 of the right
// machine whose header, section and program header tables lie inside the
// file; PTX must be text naming a .version and a .target. Returns false with
// `why` (one line naming `label`) on the first failure. Never reads past
// `bytes`.
bool check_artifact(std::span<const uint8_t> bytes, ArtifactKind kind, std::string_view label,
                    std::string* why);

}  // namespace luminav::cuda
