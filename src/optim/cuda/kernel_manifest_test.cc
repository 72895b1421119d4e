// Tests of manifest.json parsing, artifact choice and verification, including
// the real cubins and PTX of this build.
#include "optim/cuda/kernel_manifest.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "optim/cuda/sha256.h"
#include "optim/cuda/test_elf.h"

namespace luminav::cuda {
namespace {

// sha256("abc"), FIPS 180-2 appendix B.1.
constexpr const char* kAbcDigest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

std::string artifact_json(const std::string& arch, const std::string& kind, const std::string& file,
                          uint64_t size, const std::string& sha) {
  return "{\"arch\": \"" + arch + "\", \"kind\": \"" + kind + "\", \"file\": \"" + file +
         "\", \"size\": " + std::to_string(size) + ", \"sha256\": \"" + sha + "\"}";
}

const std::string kKernel =
    "{\"name\": \"k\", \"signature\": \"(const P)\", \"num_trailing_scratch_ptrs\": 1, "
    "\"block_size\": 256, \"shared_mem_bytes\": 0}";

std::string manifest_with(const std::string& artifacts, const std::string& kernels = kKernel) {
  return "{\"platform\": \"cuda\", \"artifacts\": [" + artifacts + "], \"kernels\": [" + kernels + "]}";
}

TEST(Sha256, KnownAnswers) {
  const std::string abc = "abc";
  EXPECT_EQ(sha256_hex({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()}), kAbcDigest);
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(KernelManifest, ParsesEveryField) {
  KernelManifest m;
  std::string why;
  ASSERT_TRUE(parse_kernel_manifest(
      manifest_with(artifact_json("sm_90", "cubin", "a.cubin", 3, kAbcDigest) + "," +
                    artifact_json("compute_75", "ptx", "a.ptx", 10, kAbcDigest)),
      &m, &why))
      << why;
  EXPECT_EQ(m.platform, "cuda");
  ASSERT_EQ(m.artifacts.size(), 2u);
  EXPECT_EQ(m.artifacts[0].arch, "sm_90");
  EXPECT_EQ(m.artifacts[0].compute_capability(), 90);
  EXPECT_EQ(m.artifacts[0].kind, ArtifactKind::kCubin);
  EXPECT_EQ(m.artifacts[0].size, 3u);
  EXPECT_EQ(m.artifacts[0].sha256, kAbcDigest);
  EXPECT_EQ(m.artifacts[1].kind, ArtifactKind::kPtx);
  EXPECT_EQ(m.artifacts[1].compute_capability(), 75);
  ASSERT_EQ(m.kernels.size(), 1u);
  const KernelEntry* k = m.find_kernel("k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->signature, "(const P)");
  EXPECT_EQ(k->num_trailing_scratch_ptrs, 1);
  EXPECT_EQ(k->block_size, 256);
  EXPECT_EQ(k->shared_mem_bytes, 0);
  EXPECT_EQ(m.find_kernel("missing"), nullptr);
}

TEST(KernelManifest, EveryMissingFieldIsNamed) {
  const char* artifact_fields[] = {"arch", "kind", "file", "size", "sha256"};
  for (const char* field : artifact_fields) {
    std::string a = artifact_json("sm_90", "cubin", "a.cubin", 3, kAbcDigest);
    const std::string key = std::string("\"") + field + "\": ";
    const size_t at = a.find(key);
    ASSERT_NE(at, std::string::npos);
    a.replace(at, key.size(), std::string("\"x_") + field + "\": ");
    KernelManifest m;
    std::string why;
    EXPECT_FALSE(parse_kernel_manifest(manifest_with(a), &m, &why)) << field;
    EXPECT_NE(why.find(std::string("\"") + field + "\""), std::string::npos) << why;
    EXPECT_NE(why.find("artifacts[0]"), std::string::npos) << why;
  }
  const char* kernel_fields[] = {"name", "signature", "num_trailing_scratch_ptrs", "block_size",
                                 "shared_mem_bytes"};
  for (const char* field : kernel_fields) {
    std::string k = kKernel;
    const std::string key = std::string("\"") + field + "\": ";
    k.replace(k.find(key), key.size(), std::string("\"x_") + field + "\": ");
    KernelManifest m;
    std::string why;
    EXPECT_FALSE(parse_kernel_manifest(manifest_with("", k), &m, &why)) << field;
    EXPECT_NE(why.find(std::string("\"") + field + "\""), std::string::npos) << why;
  }
  KernelManifest m;
  std::string why;
  EXPECT_FALSE(parse_kernel_manifest("{\"artifacts\": [], \"kernels\": []}", &m, &why));
  EXPECT_NE(why.find("platform"), std::string::npos);
  EXPECT_FALSE(parse_kernel_manifest("{\"platform\": \"cuda\", \"kernels\": []}", &m, &why));
  EXPECT_NE(why.find("artifacts"), std::string::npos);
}

TEST(KernelManifest, BadValuesAreRefused) {
  KernelManifest m;
  std::string why;
  EXPECT_FALSE(parse_kernel_manifest("{\"platform\": \"cuda\", ", &m, &why));
  EXPECT_NE(why.find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(parse_kernel_manifest(
      manifest_with(artifact_json("sm_90", "cubin", "a.cubin", 3, "ABC")), &m, &why));
  EXPECT_NE(why.find("sha256"), std::string::npos);
  EXPECT_FALSE(parse_kernel_manifest(
      manifest_with(artifact_json("sm_90", "elf", "a.cubin", 3, kAbcDigest)), &m, &why));
  EXPECT_NE(why.find("unknown kind"), std::string::npos);
  EXPECT_FALSE(parse_kernel_manifest(
      manifest_with(artifact_json("sm_90", "cubin", "../a.cubin", 3, kAbcDigest)), &m, &why));
  EXPECT_NE(why.find("plain name"), std::string::npos);
  EXPECT_FALSE(parse_kernel_manifest(
      manifest_with(artifact_json("hopper", "cubin", "a.cubin", 3, kAbcDigest)), &m, &why));
  EXPECT_NE(why.find("sm_XY"), std::string::npos);
  std::string k = kKernel;
  k.replace(k.find("\"num_trailing_scratch_ptrs\": 1"), 30, "\"num_trailing_scratch_ptrs\": 3");
  EXPECT_FALSE(parse_kernel_manifest(manifest_with("", k), &m, &why));
  EXPECT_NE(why.find("0, 1 or 2"), std::string::npos) << why;
}

TEST(KernelManifest, CubinByComputeCapabilityWithPtxFallback) {
  KernelManifest m;
  for (const char* arch : {"sm_75", "sm_80", "sm_86", "sm_90", "sm_120"}) {
    m.artifacts.push_back({arch, ArtifactKind::kCubin, std::string(arch) + ".cubin", 0, ""});
  }
  m.artifacts.push_back({"compute_75", ArtifactKind::kPtx, "k.ptx", 0, ""});
  auto names = [&](int cc) {
    std::string s;
    for (const ArtifactEntry* a : artifact_candidates(m, cc)) s += a->arch + " ";
    return s;
  };
  EXPECT_EQ(names(90), "sm_90 compute_75 ");
  EXPECT_EQ(names(86), "sm_86 compute_75 ");
  EXPECT_EQ(names(89), "sm_86 compute_75 ");   // same major, highest minor below
  EXPECT_EQ(names(100), "compute_75 ");        // no sm_10x cubin: PTX
  EXPECT_EQ(names(121), "sm_120 compute_75 ");
  EXPECT_EQ(names(130), "compute_75 ");        // a future device: PTX
  EXPECT_EQ(names(70), "");                    // older than every artifact
}

TEST(KernelManifest, VerifyChecksSizeShaAndFormat) {
  const auto elf = testing::make_elf64(190);
  ArtifactEntry e{"sm_90", ArtifactKind::kCubin, "k.cubin", elf.size(), sha256_hex(elf)};
  std::string why;
  EXPECT_TRUE(verify_artifact(e, elf, &why)) << why;

  auto changed = elf;
  changed[sizeof(Elf64_Ehdr) + 3] ^= 1;  // one payload bit: same size, other digest
  EXPECT_FALSE(verify_artifact(e, changed, &why));
  EXPECT_NE(why.find("does not match the manifest"), std::string::npos) << why;

  std::vector<uint8_t> cut(elf.begin(), elf.end() - 1);
  EXPECT_FALSE(verify_artifact(e, cut, &why));
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;

  const std::string stub = "// LUMINAV_TRITON_AOT_CUBIN\n";
  std::vector<uint8_t> stub_bytes(stub.begin(), stub.end());
  ArtifactEntry s{"sm_90", ArtifactKind::kCubin, "k.cubin", stub_bytes.size(), sha256_hex(stub_bytes)};
  EXPECT_FALSE(verify_artifact(s, stub_bytes, &why));  // digest right, still a stub
  EXPECT_NE(why.find("stub"), std::string::npos);
}

TEST(KernelManifest, DirectoryStoreReadsFilesAndReportsMissingOnes) {
  const auto dir = std::filesystem::temp_directory_path() / ("luminav_manifest_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto elf = testing::make_elf64(190);
  {
    std::ofstream(dir / "k.cubin", std::ios::binary).write(reinterpret_cast<const char*>(elf.data()),
                                                             static_cast<std::streamsize>(elf.size()));
    std::ofstream(dir / "manifest.json")
        << manifest_with(artifact_json("sm_90", "cubin", "k.cubin", elf.size(), sha256_hex(elf)));
  }
  DirectoryArtifactStore store(dir.string());
  std::string json, why;
  ASSERT_TRUE(store.manifest_json(&json, &why)) << why;
  KernelManifest m;
  ASSERT_TRUE(parse_kernel_manifest(json, &m, &why)) << why;
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(store.read(m.artifacts[0].file, &bytes, &why)) << why;
  EXPECT_TRUE(verify_artifact(m.artifacts[0], bytes, &why)) << why;
  EXPECT_FALSE(store.read("absent.cubin", &bytes, &why));
  EXPECT_NE(why.find("absent.cubin"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// The artifacts nvcc built for this library: every one passes its checks, and
// each cubin is an EM_CUDA ELF64 (read here byte by byte, independently).
TEST(KernelManifest, RealArtifactsOfThisBuildVerify) {
  const std::string dir = LUMINAV_CUDA_KERNEL_DIR;
  if (dir.empty()) GTEST_SKIP() << "built without nvcc";
  DirectoryArtifactStore store(dir);
  std::string json, why;
  ASSERT_TRUE(store.manifest_json(&json, &why)) << why;
  KernelManifest m;
  ASSERT_TRUE(parse_kernel_manifest(json, &m, &why)) << why;
  ASSERT_FALSE(m.artifacts.empty());
  EXPECT_NE(m.find_kernel("luminav_apply_pf32_gf32"), nullptr);
  EXPECT_NE(m.find_kernel("luminav_reduce_pbf16_gbf16"), nullptr);
  EXPECT_NE(m.find_kernel("luminav_combine_partials"), nullptr);
  bool saw_cubin = false, saw_ptx = false;
  for (const ArtifactEntry& a : m.artifacts) {
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(store.read(a.file, &bytes, &why)) << why;
    EXPECT_TRUE(verify_artifact(a, bytes, &why)) << why;
    if (a.kind == ArtifactKind::kCubin) {
      saw_cubin = true;
      ASSERT_GE(bytes.size(), 20u);
      EXPECT_EQ(bytes[0], 0x7f);
      EXPECT_EQ(bytes[4], 2);                       // ELFCLASS64
      EXPECT_EQ(bytes[18] | (bytes[19] << 8), 190);  // e_machine = EM_CUDA
      // Truncating a real cubin is caught by size, and by the ELF check alone.
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2));
      EXPECT_FALSE(verify_artifact(a, cut, &why));
      EXPECT_FALSE(check_artifact(cut, ArtifactKind::kCubin, a.file, &why));
    } else if (a.kind == ArtifactKind::kPtx) {
      saw_ptx = true;
    }
  }
  EXPECT_TRUE(saw_cubin);
  EXPECT_TRUE(saw_ptx);
}

}  // namespace
}  // namespace luminav::cuda
