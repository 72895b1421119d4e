// Test helper: builds small well-formed ELF64 images for the artifact checks.
#pragma once

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace luminav::cuda::testing {

// An ELF64 little-endian relocatable file of `machine` with a null section,
// one PROGBITS section of `payload` bytes and the section header table last.
inline std::vector<uint8_t> make_elf64(uint16_t machine, size_t payload = 32) {
  Elf64_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = ELFCLASS64;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_ident[EI_VERSION] = EV_CURRENT;
  h.e_type = ET_REL;
  h.e_machine = machine;
  h.e_version = EV_CURRENT;
  h.e_ehsize = sizeof(Elf64_Ehdr);
  h.e_shentsize = sizeof(Elf64_Shdr);
  h.e_shnum = 2;
  h.e_shoff = sizeof(Elf64_Ehdr) + payload;
  std::vector<uint8_t> out(h.e_shoff + 2 * sizeof(Elf64_Shdr), 0);
  std::memcpy(out.data(), &h, sizeof h);
  for (size_t i = 0; i < payload; ++i) out[sizeof h + i] = static_cast<uint8_t>(i * 7 + 1);
  Elf64_Shdr s{};
  s.sh_type = SHT_PROGBITS;
  s.sh_offset = sizeof h;
  s.sh_size = payload;
  std::memcpy(out.data() + h.e_shoff + sizeof(Elf64_Shdr), &s, sizeof s);
  return out;
}

}  // namespace luminav::cuda::testing
