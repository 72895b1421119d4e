// ELF64 header, stub and PTX checks of GPU kernel artifacts.
#include "optim/cuda/artifact_check.h"

#include <elf.h>

#include <cstring>

namespace luminav::cuda {

std::string_view artifact_kind_name(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kCubin: return "cubin";
    case ArtifactKind::kPtx: return "ptx";
    case ArtifactKind::kHsaco: return "hsaco";
  }
  return "artifact";
}

namespace {

bool starts_with(std::span<const uint8_t> bytes, std::string_view prefix) {
  return bytes.size() >= prefix.size() && std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

bool fail(std::string* why, std::string_view label, std::string_view what) {
  *why = std::string(label) + ": " + std::string(what);
  return false;
}

// True when [offset, offset + count * entry_size) lies inside `size`, without
// overflowing.
bool table_inside(uint64_t offset, uint64_t count, uint64_t entry_size, uint64_t size) {
  if (count == 0) return true;
  if (offset > size) return false;
  if (entry_size != 0 && count > (size - offset) / entry_size) return false;
  return true;
}

bool check_elf(std::span<const uint8_t> bytes, uint16_t machine, std::string_view label,
               std::string* why) {
  if (bytes.size() < sizeof(Elf64_Ehdr)) {
    return fail(why, label, "truncated: " + std::to_string(bytes.size()) +
                                " bytes, shorter than an ELF64 header (64 bytes)");
  }
  Elf64_Ehdr h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return fail(why, label, "not an ELF file (bad magic)");
  if (h.e_ident[EI_CLASS] != ELFCLASS64) return fail(why, label, "not ELF64 (EI_CLASS is not ELFCLASS64)");
  if (h.e_ident[EI_DATA] != ELFDATA2LSB) return fail(why, label, "not little-endian ELF");
  if (h.e_machine != machine) {
    return fail(why, label, "ELF machine " + std::to_string(h.e_machine) + ", expected " +
                                std::to_string(machine) +
                                (machine == kElfMachineCuda ? " (EM_CUDA)" : " (EM_AMDGPU)"));
  }
  if (h.e_ehsize != sizeof(Elf64_Ehdr)) return fail(why, label, "corrupt ELF header size");
  const uint64_t size = bytes.size();
  if (h.e_shnum != 0 && h.e_shentsize != sizeof(Elf64_Shdr)) {
    return fail(why, label, "corrupt section header entry size");
  }
  if (!table_inside(h.e_shoff, h.e_shnum, h.e_shentsize, size)) {
    return fail(why, label, "truncated or corrupt: the section header table ends past the file (" +
                                std::to_string(size) + " bytes)");
  }
  if (h.e_phnum != 0 && h.e_phentsize != sizeof(Elf64_Phdr)) {
    return fail(why, label, "corrupt program header entry size");
  }
  if (!table_inside(h.e_phoff, h.e_phnum, h.e_phentsize, size)) {
    return fail(why, label, "truncated or corrupt: the program header table ends past the file");
  }
  if (h.e_shnum == 0) return fail(why, label, "ELF file without sections");
  // Every section's contents must lie inside the file too (truncation cuts
  // the data before the tables at the end only when the tables survived).
  for (uint16_t i = 0; i < h.e_shnum; ++i) {
    Elf64_Shdr s;
    std::memcpy(&s, bytes.data() + h.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), sizeof s);
    if (s.sh_type == SHT_NOBITS || s.sh_type == SHT_NULL) continue;
    if (!table_inside(s.sh_offset, 1, s.sh_size, size)) {
      return fail(why, label, "truncated or corrupt: section " + std::to_string(i) +
                                  " ends past the file");
    }
  }
  return true;
}

bool check_ptx(std::span<const uint8_t> bytes, std::string_view label, std::string* why) {
  size_t length = bytes.size();
  while (length > 0 && bytes[length - 1] == 0) --length;  // trailing NULs are allowed
  if (length == 0) return fail(why, label, "empty PTX");
  for (size_t i = 0; i < length; ++i) {
    const uint8_t c = bytes[i];
    if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c >= 0x80) {
      return fail(why, label, "not PTX text (binary byte at offset " + std::to_string(i) + ")");
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), length);
  if (text.find(".version") == std::string_view::npos || text.find(".target") == std::string_view::npos) {
    return fail(why, label, "not PTX (no .version/.target directive)");
  }
  return true;
}

}  // namespace

bool check_artifact(std::span<const uint8_t> bytes, ArtifactKind kind, std::string_view label,
                    std::string* why) {
  if (bytes.empty()) return fail(why, label, "empty file");
  if (starts_with(bytes, kCudaStubMagic) || starts_with(bytes, kRocmStubMagic)) {
    const std::string_view magic = starts_with(bytes, kCudaStubMagic) ? kCudaStubMagic : kRocmStubMagic;
    return fail(why, label, "is a stub artifact (starts with \"" + std::string(magic) +
                                "\"), not a compiled kernel; rebuild the kernels with nvcc/hipcc");
  }
  switch (kind) {
    case ArtifactKind::kCubin: return check_elf(bytes, kElfMachineCuda, label, why);
    case ArtifactKind::kHsaco: return check_elf(bytes, kElfMachineAmdgpu, label, why);
    case ArtifactKind::kPtx: return check_ptx(bytes, label, why);
  }
  return fail(why, label, "unknown artifact kind");
}

}  // namespace luminav::cuda
