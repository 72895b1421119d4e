// Tests of the ELF64/stub/PTX checks on real cubins and on bad files.
#include "optim/cuda/artifact_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "optim/cuda/test_elf.h"

namespace luminav::cuda {
namespace {

using testing::make_elf64;

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

TEST(ArtifactCheck, WellFormedElfOfTheRightMachinePasses) {
  std::string why;
  EXPECT_TRUE(check_artifact(make_elf64(190), ArtifactKind::kCubin, "a.cubin", &why)) << why;
  EXPECT_TRUE(check_artifact(make_elf64(224), ArtifactKind::kHsaco, "a.hsaco", &why)) << why;
}

TEST(ArtifactCheck, WrongMachineIsRefusedByNumber) {
  std::string why;
  EXPECT_FALSE(check_artifact(make_elf64(224), ArtifactKind::kCubin, "a.cubin", &why));
  EXPECT_NE(why.find("machine 224, expected 190 (EM_CUDA)"), std::string::npos) << why;
  EXPECT_FALSE(check_artifact(make_elf64(62 /* x86-64 */), ArtifactKind::kHsaco, "a.hsaco", &why));
  EXPECT_NE(why.find("expected 224 (EM_AMDGPU)"), std::string::npos) << why;
}

TEST(ArtifactCheck, BadMagicClassAndEndiannessAreRefused) {
  std::string why;
  auto elf = make_elf64(190);
  elf[1] = 'X';
  EXPECT_FALSE(check_artifact(elf, ArtifactKind::kCubin, "a", &why));
  EXPECT_NE(why.find("bad magic"), std::string::npos);
  elf = make_elf64(190);
  elf[EI_CLASS] = ELFCLASS32;
  EXPECT_FALSE(check_artifact(elf, ArtifactKind::kCubin, "a", &why));
  EXPECT_NE(why.find("ELF64"), std::string::npos);
  elf = make_elf64(190);
  elf[EI_DATA] = ELFDATA2MSB;
  EXPECT_FALSE(check_artifact(elf, ArtifactKind::kCubin, "a", &why));
  EXPECT_NE(why.find("little-endian"), std::string::npos);
}

TEST(ArtifactCheck, EveryTruncationIsRefusedWithoutReadingPastTheEnd) {
  const auto elf = make_elf64(190, 100);
  for (size_t n = 0; n < elf.size(); ++n) {
    // A fresh heap copy of exactly n bytes, so a read past it is caught by
    // sanitizers and Valgrind rather than hidden by the larger buffer.
    std::vector<uint8_t> cut(elf.begin(), elf.begin() + static_cast<long>(n));
    std::string why;
    EXPECT_FALSE(check_artifact(cut, ArtifactKind::kCubin, "cut.cubin", &why)) << n;
    EXPECT_FALSE(why.empty());
  }
}

TEST(ArtifactCheck, TablesPointingOutsideTheFileAreRefused) {
  std::string why;
  auto elf = make_elf64(190);
  Elf64_Ehdr h;
  std::memcpy(&h, elf.data(), sizeof h);
  h.e_shoff = ~uint64_t{0} - 8;  // overflow bait
  std::memcpy(elf.data(), &h, sizeof h);
  EXPECT_FALSE(check_artifact(elf, ArtifactKind::kCubin, "a", &why));
  EXPECT_NE(why.find("section header table"), std::string::npos) << why;

  elf = make_elf64(190);
  std::memcpy(&h, elf.data(), sizeof h);
  Elf64_Shdr s;
  std::memcpy(&s, elf.data() + h.e_shoff + sizeof s, sizeof s);
  s.sh_size = 1u << 20;  // a section larger than the file
  std::memcpy(elf.data() + h.e_shoff + sizeof s, &s, sizeof s);
  EXPECT_FALSE(check_artifact(elf, ArtifactKind::kCubin, "a", &why));
  EXPECT_NE(why.find("section 1 ends past the file"), std::string::npos) << why;
}

TEST(ArtifactCheck, StubsOfBothPlatformsAreRecognisedAndRefused) {
  std::string why;
  const auto cuda_stub = bytes_of("// LUMINAV_TRITON_AOT_CUBIN\nplaceholder for luminav_clm\n");
  EXPECT_FALSE(check_artifact(cuda_stub, ArtifactKind::kCubin, "k.cubin", &why));
  EXPECT_NE(why.find("stub"), std::string::npos);
  EXPECT_NE(why.find("// LUMINAV_TRITON_AOT_CUBIN"), std::string::npos);
  const auto rocm_stub = bytes_of("; LUMINAV_TRITON_AOT_HSACO\n");
  EXPECT_FALSE(check_artifact(rocm_stub, ArtifactKind::kHsaco, "k.hsaco", &why));
  EXPECT_NE(why.find("; LUMINAV_TRITON_AOT_HSACO"), std::string::npos);
  // A stub is refused whatever kind it claims to be.
  EXPECT_FALSE(check_artifact(cuda_stub, ArtifactKind::kPtx, "k.ptx", &why));
  EXPECT_NE(why.find("stub"), std::string::npos);
}

TEST(ArtifactCheck, PtxMustBeTextWithVersionAndTarget) {
  std::string why;
  EXPECT_TRUE(check_artifact(bytes_of("//\n.version 9.0\n.target sm_75\n.address_size 64\n"),
                             ArtifactKind::kPtx, "k.ptx", &why))
      << why;
  EXPECT_FALSE(check_artifact(bytes_of(".target sm_75\n"), ArtifactKind::kPtx, "k.ptx", &why));
  EXPECT_FALSE(check_artifact(make_elf64(190), ArtifactKind::kPtx, "k.ptx", &why));
  EXPECT_NE(why.find("binary byte"), std::string::npos);
  EXPECT_FALSE(check_artifact({}, ArtifactKind::kPtx, "k.ptx", &why));
  EXPECT_NE(why.find("empty"), std::string::npos);
}

TEST(ArtifactCheck, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(1234);
  const auto good = make_elf64(190, 64);
  for (int trial = 0; trial < 2000; ++trial) {
    auto bad = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    bad.resize(rng() % (bad.size() + 1));
    std::string why;
    check_artifact(bad, ArtifactKind::kCubin, "fuzz", &why);
    check_artifact(bad, ArtifactKind::kPtx, "fuzz", &why);
  }
}

}  // namespace
}  // namespace luminav::cuda
