// The Triton AOT kernels from C++: the build's manifests and images (CPU), the
// scratch-pointer rules, the ROCm module API's resolution, and (with a CUDA GPU)
// a whole CLM step run from the cubins against a float64 reference.
#include "optim/triton/triton_aot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "optim/cuda/triton_abi.h"
#include "optim/triton/triton_aot_batches.h"
#include "optim/triton/triton_aot_clm_step.h"
#include "optim/triton/triton_aot_tdclm_step.h"
#include "test_support/scratch_dir.h"

namespace luminav::triton_aot {
namespace {

#ifndef LUMINAV_TRITON_AOT_DIR
#define LUMINAV_TRITON_AOT_DIR ""
#endif

std::string built_dir(const char* platform) {
  const char* env = std::getenv("LUMINAV_TRITON_AOT_DIR");
  const std::string base = env != nullptr && *env ? env : LUMINAV_TRITON_AOT_DIR;
  return base.empty() ? "" : base + "/" + platform;
}

bool read_built(const char* platform, cuda::KernelManifest* m, std::string* json) {
  const std::string dir = built_dir(platform);
  if (dir.empty() || !std::filesystem::exists(dir + "/manifest.json")) return false;
  cuda::DirectoryArtifactStore store(dir);
  std::string why;
  EXPECT_TRUE(store.manifest_json(json, &why)) << why;
  EXPECT_TRUE(cuda::parse_kernel_manifest(*json, m, &why)) << why;
  return true;
}

TEST(TritonAot, TrailingScratchPointersByVersion) {
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("3.0.0"), 0);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("3.2.0"), 0);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("3.3.1"), 1);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("3.4.0"), 1);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("3.6.0"), 2);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("3.10"), 2);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs("three"), -1);
  EXPECT_EQ(cuda::triton_trailing_scratch_ptrs(""), -1);
}

// Every image the build wrote: size, sha256 and ELF machine (EM_CUDA 190 for
// cubins, EM_AMDGPU 224 for hsaco) through the loader's own checks.
TEST(TritonAot, BuiltManifestsAndImagesPassTheChecks) {
  int platforms = 0;
  for (const char* platform : {"cuda", "rocm"}) {
    cuda::KernelManifest m;
    std::string json, why;
    if (!read_built(platform, &m, &json)) continue;
    ++platforms;
    EXPECT_EQ(m.platform, platform);
    EXPECT_FALSE(m.triton_version.empty());
    EXPECT_TRUE(cuda::check_triton_manifest(m, &why)) << why;
    ASSERT_FALSE(m.kernels.empty());
    cuda::DirectoryArtifactStore store(built_dir(platform));
    for (const cuda::ArtifactEntry& a : m.artifacts) {
      std::vector<uint8_t> bytes;
      ASSERT_TRUE(store.read(a.file, &bytes, &why)) << why;
      EXPECT_TRUE(cuda::verify_artifact(a, bytes, &why)) << why;
      EXPECT_FALSE(a.kernel.empty());
      EXPECT_FALSE(a.symbol.empty());
      if (a.kind != cuda::ArtifactKind::kPtx) {
        ASSERT_GE(bytes.size(), 20u);
        const uint16_t machine = static_cast<uint16_t>(bytes[18] | (bytes[19] << 8));
        EXPECT_EQ(machine, std::string(platform) == "cuda" ? cuda::kElfMachineCuda : cuda::kElfMachineAmdgpu);
      }
    }
    // A file whose bytes changed is refused by its digest.
    const cuda::ArtifactEntry& first = m.artifacts.front();
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(store.read(first.file, &bytes, &why));
    bytes[bytes.size() / 2] ^= 0x5a;
    EXPECT_FALSE(cuda::verify_artifact(first, bytes, &why));
    EXPECT_NE(why.find("sha256"), std::string::npos) << why;
  }
  if (platforms == 0) GTEST_SKIP() << "built without LUMINA_TRITON_AOT (no triton at build time)";
}

TEST(TritonAot, WrongScratchPointerCountIsRefused) {
  const std::string json = R"json({"platform": "cuda", "triton_version": "3.6.0",
    "artifacts": [{"arch": "sm_90", "kind": "cubin", "file": "k.sm_90.cubin", "size": 1,
                   "sha256": "0000000000000000000000000000000000000000000000000000000000000000",
                   "kernel": "k", "symbol": "k"}],
    "kernels": [{"name": "k", "signature": "(x:*fp32)", "num_trailing_scratch_ptrs": 1,
                 "block_size": 256, "shared_mem_bytes": 0}]})json";
  cuda::KernelManifest m;
  std::string why;
  ASSERT_TRUE(cuda::parse_kernel_manifest(json, &m, &why)) << why;
  EXPECT_FALSE(cuda::check_triton_manifest(m, &why));
  EXPECT_NE(why.find("kernel k declares 1 trailing scratch pointer(s)"), std::string::npos) << why;
  EXPECT_NE(why.find("Triton 3.6.0 take 2"), std::string::npos) << why;
  // The same entry from a 3.4 build is right, one from 3.2 wrong again.
  m.triton_version = "3.4.0";
  EXPECT_TRUE(cuda::check_triton_manifest(m, &why)) << why;
  m.triton_version = "3.2.0";
  EXPECT_FALSE(cuda::check_triton_manifest(m, &why));
  m.triton_version = "";
  EXPECT_FALSE(cuda::check_triton_manifest(m, &why));
  EXPECT_NE(why.find("triton_version"), std::string::npos) << why;
  // A kernel without any artifact.
  m.triton_version = "3.6.0";
  m.kernels[0].num_trailing_scratch_ptrs = 2;
  m.artifacts[0].kernel = "other";
  EXPECT_FALSE(cuda::check_triton_manifest(m, &why));
  EXPECT_NE(why.find("has no artifact"), std::string::npos) << why;
}

// ---- the triton-aot backend's kernel directory (no GPU) ----------------------------------

// A CUDA manifest of the CLM and TD-CLM kernel sets as build_triton_aot.py writes it (the
// artifacts are never read by the directory check); `edit` changes one kernel.
std::string clm_manifest(const std::string& version, int trailing,
                         const std::function<void(std::string& name, std::string& signature, int& per)>& edit) {
  std::string artifacts, kernels;
  std::vector<AotKernelAbi> both(std::begin(kClmKernelSet), std::end(kClmKernelSet));
  both.insert(both.end(), std::begin(kTdclmKernelSet), std::end(kTdclmKernelSet));
  both.insert(both.end(), std::begin(kBatchKernelSet), std::end(kBatchKernelSet));
  for (const AotKernelAbi& abi : both) {
    std::string name(abi.name), signature(abi.signature);
    // The tiles of build_triton_aot.py: the sums kernels 128 rows by their name's columns, the
    // factor kernels 256 rows or columns a program.
    const bool factors = name.ends_with("_rows") || name.ends_with("_cols");
    int per = name.find("reduce") != std::string::npos || name.find("finite_check") != std::string::npos ? 4096
              : name.find("_sums_") != std::string::npos ? (name.find("x256") != std::string::npos   ? 32768
                                                            : name.find("x128") != std::string::npos ? 16384
                                                                                                     : 2048)
              : factors                                   ? 256
              : name.find("apply") != std::string::npos   ? 1024
                                                          : 0;
    edit(name, signature, per);
    if (name.empty()) continue;  // dropped
    artifacts += std::string(artifacts.empty() ? "" : ",") + R"({"arch": "sm_90", "kind": "cubin", "file": ")" +
                 name + R"(.cubin", "size": 1, "sha256": ")" + std::string(64, '0') + R"(", "kernel": ")" + name +
                 R"(", "symbol": ")" + name + R"("})";
    kernels += std::string(kernels.empty() ? "" : ",") + R"({"name": ")" + name + R"(", "signature": ")" +
               signature + R"(", "num_trailing_scratch_ptrs": )" + std::to_string(trailing) +
               R"(, "block_size": 128, "shared_mem_bytes": 0, "elements_per_program": )" + std::to_string(per) + "}";
  }
  return R"({"format": "luminav-kernels/1", "platform": "cuda", "triton_version": ")" + version +
         R"(", "artifacts": [)" + artifacts + R"(], "kernels": [)" + kernels + "]}";
}

// A fresh DIR/cuda/manifest.json holding `json`; returns DIR.
std::string directory_with(const std::string& json, const std::string& tag) {
  static const luminamoon::test_support::ScratchDir scratch("luminav_triton_aot");
  const auto dir = scratch.path() / tag;
  std::filesystem::create_directories(dir / "cuda");
  std::FILE* f = std::fopen((dir / "cuda" / "manifest.json").c_str(), "wb");
  std::fwrite(json.data(), 1, json.size(), f);
  std::fclose(f);
  return dir.string();
}

void keep(std::string&, std::string&, int&) {}

TEST(TritonAotDirectory, TheKernelSetAsBuiltIsAccepted) {
  cuda::KernelManifest m;
  std::string why;
  EXPECT_TRUE(check_kernel_directory(directory_with(clm_manifest("3.6.0", 2, keep), "ok"), &m, &why)) << why;
  EXPECT_EQ(m.find_kernel("luminav_triton_apply_pf32_gf32")->elements_per_program, 1024u);
  const std::string built = built_dir("cuda");
  if (built.empty() || !std::filesystem::exists(built + "/manifest.json")) {
    GTEST_SKIP() << "built without LUMINA_TRITON_AOT (no triton at build time)";
  }
  // The build's own manifest: its signatures are the ones the launcher packs.
  const std::string base = built.substr(0, built.size() - 5);
  EXPECT_TRUE(check_kernel_directory(base, &m, &why)) << why;
  for (const AotKernelAbi& abi : kClmKernelSet) EXPECT_NE(m.find_kernel(abi.name), nullptr) << abi.name;
  for (const AotKernelAbi& abi : kTdclmKernelSet) EXPECT_NE(m.find_kernel(abi.name), nullptr) << abi.name;
  for (const AotKernelAbi& abi : kBatchKernelSet) EXPECT_NE(m.find_kernel(abi.name), nullptr) << abi.name;
}

// Every TD-CLM and multi-tensor kernel of the build is there for every target the CLM kernels were built for
// (cubins, PTX and hsaco alike), with the signature this library packs.
TEST(TritonAotDirectory, TheTdclmAndBatchKernelsAreBuiltForEveryTargetOfTheClmOnes) {
  int platforms = 0;
  for (const char* platform : {"cuda", "rocm"}) {
    cuda::KernelManifest m;
    std::string json, why;
    if (!read_built(platform, &m, &json)) continue;
    ++platforms;
    auto archs_of = [&](std::string_view kernel) {
      std::vector<std::string> archs;
      for (const cuda::ArtifactEntry& a : m.artifacts) {
        if (a.kernel == kernel) archs.push_back(a.arch);
      }
      std::sort(archs.begin(), archs.end());
      return archs;
    };
    const std::vector<std::string> clm_archs = archs_of("luminav_triton_apply_pf32_gf32");
    ASSERT_FALSE(clm_archs.empty()) << platform;
    EXPECT_TRUE(check_tdclm_kernel_set(m, &why)) << platform << ": " << why;
    EXPECT_TRUE(check_batch_kernel_set(m, &why)) << platform << ": " << why;
    std::vector<AotKernelAbi> sets(std::begin(kTdclmKernelSet), std::end(kTdclmKernelSet));
    sets.insert(sets.end(), std::begin(kBatchKernelSet), std::end(kBatchKernelSet));
    for (const AotKernelAbi& abi : sets) {
      const cuda::KernelEntry* k = m.find_kernel(abi.name);
      ASSERT_NE(k, nullptr) << platform << " " << abi.name;
      EXPECT_EQ(k->signature, abi.signature) << abi.name;
      EXPECT_EQ(k->num_trailing_scratch_ptrs, cuda::triton_trailing_scratch_ptrs(m.triton_version)) << abi.name;
      EXPECT_EQ(archs_of(abi.name), clm_archs) << platform << " " << abi.name;
    }
  }
  if (platforms == 0) GTEST_SKIP() << "built without LUMINA_TRITON_AOT (no triton at build time)";
}

// check_kernel_directory refuses the manifest `edit` makes of the built set, with `needle` in its reason.
using ManifestEdit = std::function<void(std::string& name, std::string& signature, int& per)>;
void expect_refused(const ManifestEdit& edit, const std::string& tag, const std::string& needle) {
  cuda::KernelManifest m;
  std::string why;
  EXPECT_FALSE(check_kernel_directory(directory_with(clm_manifest("3.6.0", 2, edit), tag), &m, &why)) << tag;
  EXPECT_NE(why.find(needle), std::string::npos) << tag << ": " << why;
}
ManifestEdit drop(std::string kernel) {
  return [kernel](std::string& name, std::string&, int&) { if (name == kernel) name.clear(); };
}
ManifestEdit per_program(std::string kernel, int elements) {
  return [kernel, elements](std::string& name, std::string&, int& per) { if (name == kernel) per = elements; };
}

TEST(TritonAotDirectory, TdclmKernelsMissingOrOfAnotherTileAreRefused) {
  expect_refused(drop("luminav_triton_factor_cols"), "tdset", "luminav_triton_factor_cols is missing");
  // A sums kernel of another tile than its name (and this launcher's grid) says.
  expect_refused(per_program("luminav_triton_factor_sums_gf32_128x128", 32768), "tile",
                 "luminav_triton_factor_sums_gf32_128x128 covers 32768 elements per program");
  // A factor kernel of another block.
  expect_refused(per_program("luminav_triton_factor_rows", 1024), "block",
                 "luminav_triton_factor_rows covers 1024 elements per program");
  // A sums kernel packed with other arguments.
  auto sums_sig = [](std::string& name, std::string& sig, int&) {
    if (name == "luminav_triton_factor_sums_gbf16_128x16") sig = "(g_ptr:*fp32, col_sums_ptr:*fp64)";
  };
  expect_refused(sums_sig, "sumsig", "kernel luminav_triton_factor_sums_gbf16_128x16 has signature");
}

// The launcher's choices: every kernel it names for a TD-CLM tensor is in the set (so in any
// accepted manifest), wide tiles from C = 128 and the _a16 ones only where their hints hold;
// the scratch sizes cover the grids.
TEST(TritonAotTdclm, LaunchesNameKernelsOfTheSetAndSizeTheirScratch) {
  auto in_set = [](const std::string& name) {
    for (const AotKernelAbi& abi : kTdclmKernelSet) {
      if (abi.name == name) return true;
    }
    return false;
  };
  for (const auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 1024}, {7, 300}, {512, 48}, {33, 100}}) {
    for (const TdclmForm form : {TdclmForm::kTensor, TdclmForm::kRow, TdclmForm::kFactored}) {
      for (const bool bf16 : {false, true}) {
        for (const uint64_t base : {uint64_t{1} << 20, (uint64_t{1} << 20) + 4}) {
          TdclmTensor t;
          t.t.param = base, t.t.grad = base + (1 << 24), t.t.exp_avg = base + (2 << 24);
          t.t.exp_avg_sq = (uint64_t{3} << 24), t.t.master = bf16 ? (uint64_t{4} << 24) : 0;
          t.t.n = rows * cols, t.t.bf16 = bf16;
          t.form = form;
          t.rows = form == TdclmForm::kTensor ? t.t.n : rows;
          t.cols = form == TdclmForm::kTensor ? 1 : cols;
          const std::string apply = tdclm_apply_kernel(t);
          EXPECT_TRUE(in_set(apply)) << apply;
          const bool hints = base % 16 == 0 && t.t.n % 16 == 0 && t.rows % 16 == 0;
          EXPECT_EQ(apply.ends_with("_a16"), hints) << apply;
          EXPECT_EQ(tdclm_region_bytes(t) % 16, 0u);
          if (form == TdclmForm::kTensor) {
            EXPECT_EQ(tdclm_row_partials_bytes(t), 0u);
            EXPECT_EQ(tdclm_col_partials_bytes(t), 0u);
            continue;
          }
          const TdclmScratch scratch{uint64_t{6} << 24, uint64_t{7} << 24};
          const std::string sums = tdclm_sums_kernel(t, scratch);
          EXPECT_TRUE(in_set(sums)) << sums;
          // A bf16 gradient's wide tile is 256 columns (8 values a lane, one 16-byte load).
          const int64_t tile_cols = cols < 128 ? 16 : bf16 ? 256 : 128;
          EXPECT_NE(sums.find("_128x" + std::to_string(tile_cols)), std::string::npos) << sums;
          const bool factor_hints = base % 16 == 0 && rows % 16 == 0 && cols % 16 == 0;
          EXPECT_EQ(sums.ends_with("_a16"), factor_hints) << sums;
          // The _a16 sums also take the partials' addresses as multiples of 16: any other takes the generic one
          // (the column partials only where the factored form writes them).
          const TdclmScratch off_rows{scratch.row_partials + 8, scratch.col_partials};
          const TdclmScratch off_cols{scratch.row_partials, scratch.col_partials + 8};
          EXPECT_FALSE(tdclm_sums_kernel(t, off_rows).ends_with("_a16"));
          EXPECT_EQ(tdclm_sums_kernel(t, off_cols).ends_with("_a16"), factor_hints && form == TdclmForm::kRow);
          // One row partial per strip of columns, one column partial per chunk of 128 rows.
          EXPECT_EQ(tdclm_row_partials_bytes(t), static_cast<size_t>((cols + tile_cols - 1) / tile_cols * rows) * 8);
          EXPECT_EQ(tdclm_col_partials_bytes(t),
                    form == TdclmForm::kFactored ? static_cast<size_t>((rows + 127) / 128 * cols) * 8 : 0u);
          EXPECT_GE(tdclm_region_bytes(t), (4 + rows + (form == TdclmForm::kFactored ? 2 * cols : 0)) * 4u);
        }
      }
    }
  }
}

// ---- many tensors per launch (Note [triton-aot batches]) ---------------------------------

StepTensor step_tensor(uint64_t base, int64_t rows, int64_t cols, bool tdclm, TdclmForm form, bool bf16,
                       size_t group, int64_t position) {
  StepTensor s;
  s.tdclm = tdclm;
  s.group = group;
  s.t.form = form;
  s.t.rows = rows, s.t.cols = cols;
  ClmTensor& t = s.t.t;
  t.n = rows * cols, t.bf16 = bf16, t.position = position, t.seed = 7 + position, t.index_offset = 3 * position;
  t.param = base, t.grad = base + 0x100000, t.exp_avg = base + 0x200000, t.exp_avg_sq = base + 0x300000;
  t.master = bf16 ? base + 0x400000 : 0;
  s.t.gl = base + 0x500000, s.t.factors = base + 0x500010;
  return s;
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Which tensors share launches, and what the tables tell each program (the layouts of
// triton_kernels.py's Note [tensor tables] and Note [factored tables], the program counts of the
// one-tensor launches: ceil(N / 4096) finite-check and ceil(N / 1024) apply programs, and for a
// factored tensor ceil(R / 128) x ceil(C / tile) sums, ceil(R / 256) row and ceil(C / 256) column programs).
TEST(TritonAotBatches, TensorsOfOneClassShareLaunchesAndTheTablesLocateEveryProgram) {
  using F = TdclmForm;
  const uint64_t M = 0x10000000;
  std::vector<StepTensor> ts = {
      step_tensor(1 * M, 5000, 1, false, F::kTensor, false, 0, 0),    // CLM, group 0
      step_tensor(2 * M, 3, 1, false, F::kTensor, false, 0, 1),       // CLM, N not a multiple of 16
      step_tensor(3 * M, 512, 384, true, F::kFactored, false, 0, 2),  // factored, wide tile
      step_tensor(4 * M, 300, 256, true, F::kFactored, false, 0, 3),  // factored, wide tile
      step_tensor(5 * M, 1000, 7, true, F::kFactored, false, 0, 4),   // narrow tile: alone in its class
      step_tensor(6 * M, 64, 64, true, F::kRow, false, 0, 5),         // row form: its own launches
      step_tensor(7 * M, 4096, 1, false, F::kTensor, true, 0, 6),     // the only bf16 CLM tensor
      step_tensor(8 * M, 0, 1, false, F::kTensor, false, 0, 7),       // empty: nothing to launch
      step_tensor(9 * M, 2048, 1, false, F::kTensor, false, 1, 8),    // CLM, group 1
      step_tensor(10 * M, 112, 1, false, F::kTensor, false, 1, 9),    // CLM, group 1
      step_tensor(11 * M, 64, 1024, true, F::kFactored, true, 1, 10), // alone
  };
  const BatchPlan plan = plan_batches(ts);
  ASSERT_EQ(plan.batches.size(), 3u);
  EXPECT_EQ(plan.batches[0].members, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan.batches[1].members, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(plan.batches[2].members, (std::vector<size_t>{8, 9}));
  EXPECT_EQ(plan.batches[2].group, 1u);
  EXPECT_EQ(plan.in_batch, (std::vector<char>{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0}));
  EXPECT_FALSE(plan.batches[0].fixed_aligned);  // N = 3
  EXPECT_TRUE(plan.batches[1].fixed_aligned);
  EXPECT_TRUE(plan.batches[2].fixed_aligned);

  // Each stage's programs: the tensors' own launches' programs, in member order.
  const std::vector<std::vector<int64_t>> counts = {
      {cdiv(5000, 4096), cdiv(3, 4096)}, {cdiv(5000, 1024), cdiv(3, 1024)},  // batch 0: check, apply
      {4 * 3, 3 * 2}, {2, 2}, {2, 1}, {cdiv(512 * 384, 1024), cdiv(300 * 256, 1024)}};  // batch 1's stages
  const uint64_t scratch = 0x7000000000;
  const std::vector<uint8_t> image = batch_tables(plan, ts, scratch);
  ASSERT_EQ(image.size(), plan.table_bytes);
  auto i64 = [&](size_t at) { int64_t v; std::memcpy(&v, image.data() + at, 8); return v; };
  auto i32 = [&](size_t at) { int32_t v; std::memcpy(&v, image.data() + at, 4); return v; };
  auto check_map = [&](const TensorBatch& b, size_t stage, const std::vector<int64_t>& per_member) {
    int64_t p = 0;
    for (size_t i = 0; i < per_member.size(); ++i) {
      for (int64_t k = 0; k < per_member[i]; ++k, ++p) ASSERT_EQ(i32(b.maps[stage] + p * 4), int32_t(i)) << stage;
    }
    EXPECT_EQ(int64_t(b.programs[stage]), p) << stage;
  };
  const TensorBatch& clm = plan.batches[0];
  for (size_t table = 0; table < 2; ++table) {
    check_map(clm, table, counts[table]);
    int64_t first = 0;
    for (size_t i = 0; i < 2; ++i) {  // TABLE_FIELDS = 9: first program, N, 4 addresses, seed, offset, position
      const size_t row = clm.tables[table] + i * 9 * 8;
      const ClmTensor& t = ts[clm.members[i]].t.t;
      EXPECT_EQ(i64(row), first);
      EXPECT_EQ(i64(row + 8), t.n);
      EXPECT_EQ(uint64_t(i64(row + 16)), t.param);
      EXPECT_EQ(uint64_t(i64(row + 24)), t.exp_avg);
      EXPECT_EQ(uint64_t(i64(row + 32)), t.exp_avg_sq);
      EXPECT_EQ(uint64_t(i64(row + 40)), t.param);  // no master: the parameter stands in
      EXPECT_EQ(i64(row + 48), t.seed);
      EXPECT_EQ(i64(row + 56), t.index_offset);
      EXPECT_EQ(i64(row + 64), t.position);
      first += counts[table][i];
    }
  }
  const TensorBatch& fac = plan.batches[1];
  std::vector<std::pair<uint64_t, uint64_t>> regions;  // every member's scratch: inside the buffer, none shared
  std::array<int64_t, 4> first{};
  for (size_t stage = 0; stage < 4; ++stage) check_map(fac, stage, counts[2 + stage]);
  for (size_t i = 0; i < 2; ++i) {  // FACTORED_FIELDS = 22 (FT_ indices of triton_kernels.py)
    const size_t row = fac.tables[0] + i * 22 * 8;
    const StepTensor& s = ts[fac.members[i]];
    const int64_t R = s.t.rows, C = s.t.cols, strips = cdiv(C, 128), chunks = cdiv(R, 128);
    for (size_t stage = 0; stage < 4; ++stage) EXPECT_EQ(i64(row + stage * 8), first[stage]);
    EXPECT_EQ(i64(row + 4 * 8), R);
    EXPECT_EQ(i64(row + 5 * 8), C);
    EXPECT_EQ(i64(row + 6 * 8), s.t.t.position);
    const uint64_t row_part = i64(row + 7 * 8), col_part = i64(row + 8 * 8), block_sums = i64(row + 9 * 8);
    regions.push_back({row_part, row_part + strips * R * 8});
    regions.push_back({col_part, col_part + chunks * C * 8});
    regions.push_back({block_sums, block_sums + cdiv(R, 256) * 8});
    EXPECT_EQ(uint64_t(i64(row + 10 * 8)), s.t.factors);
    EXPECT_EQ(uint64_t(i64(row + 11 * 8)), s.t.gl);
    EXPECT_EQ(uint64_t(i64(row + 12 * 8)), s.t.t.param);
    EXPECT_EQ(uint64_t(i64(row + 13 * 8)), s.t.t.exp_avg);
    EXPECT_EQ(uint64_t(i64(row + 14 * 8)), s.t.t.exp_avg_sq);
    EXPECT_EQ(uint64_t(i64(row + 15 * 8)), s.t.t.param);
    EXPECT_EQ(i64(row + 16 * 8), s.t.t.seed);
    EXPECT_EQ(i64(row + 17 * 8), s.t.t.index_offset);
    EXPECT_EQ(i64(row + 18 * 8), strips);
    EXPECT_EQ(i64(row + 19 * 8), chunks);
    EXPECT_EQ(i64(row + 20 * 8), cdiv(R, 256));
    EXPECT_EQ(i64(row + 21 * 8), counts[5][i]);
    for (size_t stage = 0; stage < 4; ++stage) first[stage] += counts[2 + stage][i];
  }
  std::sort(regions.begin(), regions.end());
  for (size_t k = 0; k < regions.size(); ++k) {
    EXPECT_GE(regions[k].first, scratch);
    EXPECT_LE(regions[k].second, scratch + plan.scratch_bytes);
    if (k > 0) EXPECT_LE(regions[k - 1].second, regions[k].first) << "scratch shared by two members";
  }

  // The gradient table: each batch's members' gradients from its first entry.
  const std::vector<uint64_t> grads = batch_gradients(plan, ts);
  ASSERT_EQ(grads.size(), 6u);
  for (const TensorBatch& b : plan.batches) {
    for (size_t i = 0; i < b.members.size(); ++i) EXPECT_EQ(grads[b.first_gradient + i], ts[b.members[i]].t.t.grad);
  }
  // The kernels: in the set, aligned where every address and N (C) and this step's gradients allow it.
  auto in_set = [](const std::string& name) {
    return std::any_of(std::begin(kBatchKernelSet), std::end(kBatchKernelSet),
                       [&](const AotKernelAbi& abi) { return abi.name == name; });
  };
  EXPECT_EQ(batch_round0_kernel(clm, ts), "luminav_triton_multi_finite_check_gf32");
  EXPECT_EQ(batch_apply_kernel(clm, ts), "luminav_triton_multi_apply_pf32_gf32");
  EXPECT_EQ(batch_round0_kernel(fac, ts), "luminav_triton_multi_factored_sums_gf32_128x128_a16");
  EXPECT_EQ(batch_apply_kernel(fac, ts), "luminav_triton_multi_factored_apply_pf32_gf32_a16");
  ts[3].t.t.grad += 4;  // a gradient off 16 bytes this step
  EXPECT_EQ(batch_apply_kernel(fac, ts), "luminav_triton_multi_factored_apply_pf32_gf32");
  for (const TensorBatch& b : plan.batches) {
    EXPECT_TRUE(in_set(batch_round0_kernel(b, ts))) << batch_round0_kernel(b, ts);
    EXPECT_TRUE(in_set(batch_apply_kernel(b, ts))) << batch_apply_kernel(b, ts);
  }
  // A new gradient keeps the key (and the tables); a moved parameter does not.
  const std::vector<uint64_t> key = batch_key(ts);
  ts[0].t.t.grad += 64;
  EXPECT_EQ(batch_key(ts), key);
  ts[0].t.t.exp_avg += 64;
  EXPECT_NE(batch_key(ts), key);
}

TEST(TritonAotDirectory, BatchKernelsMissingOrOfAnotherBlockAreRefused) {
  expect_refused(drop("luminav_triton_multi_factored_cols"), "nomulti",
                 "luminav_triton_multi_factored_cols is missing");
  // The program maps assume 4096 elements a finite-check program and 1024 an apply program.
  expect_refused(per_program("luminav_triton_multi_finite_check_gbf16_a16", 1024), "mblock",
                 "luminav_triton_multi_finite_check_gbf16_a16 covers 1024 elements per program");
  expect_refused(per_program("luminav_triton_multi_apply_pf32_gf32", 4096), "mapply",
                 "luminav_triton_multi_apply_pf32_gf32 covers 4096 elements per program");
}

TEST(TritonAotDirectory, MissingOrMismatchedKernelsAreRefusedWithTheReason) {
  cuda::KernelManifest m;
  std::string why;
  EXPECT_FALSE(check_kernel_directory("/nonexistent/luminav_triton_kernels", &m, &why));
  EXPECT_NE(why.find("Triton AOT kernels in /nonexistent/luminav_triton_kernels/cuda"), std::string::npos) << why;
  EXPECT_NE(why.find("LUMINA_TRITON_AOT"), std::string::npos) << why;
  EXPECT_FALSE(check_kernel_directory("", &m, &why));
  EXPECT_NE(why.find("LUMINAV_TRITON_AOT_DIR"), std::string::npos) << why;

  // A kernel whose arguments differ from what the launcher packs (another build).
  auto reordered = [](std::string& name, std::string& sig, int&) {
    if (name == "luminav_triton_apply_pf32_gf32") sig = "(g_ptr:*fp32, p_ptr:*fp32)";
  };
  EXPECT_FALSE(check_kernel_directory(directory_with(clm_manifest("3.6.0", 2, reordered), "sig"), &m, &why));
  EXPECT_NE(why.find("kernel luminav_triton_apply_pf32_gf32 has signature \"(g_ptr:*fp32, p_ptr:*fp32)\""),
            std::string::npos) << why;

  // A set without the bf16 kernels (LUMINA_TRITON_AOT_KERNELS=clm_f32).
  auto no_bf16 = [](std::string& name, std::string&, int&) {
    if (name.find("bf16") != std::string::npos) name.clear();
  };
  EXPECT_FALSE(check_kernel_directory(directory_with(clm_manifest("3.6.0", 2, no_bf16), "set"), &m, &why));
  EXPECT_NE(why.find("luminav_triton_reduce_gbf16 is missing"), std::string::npos) << why;

  // Scratch pointers of another Triton version than the one recorded.
  EXPECT_FALSE(check_kernel_directory(directory_with(clm_manifest("3.6.0", 1, keep), "scratch"), &m, &why));
  EXPECT_NE(why.find("trailing scratch pointer"), std::string::npos) << why;

  // No grid rule for a pass kernel.
  auto no_per = [](std::string& name, std::string&, int& per) {
    if (name == "luminav_triton_reduce_gf32") per = 0;
  };
  EXPECT_FALSE(check_kernel_directory(directory_with(clm_manifest("3.6.0", 2, no_per), "per"), &m, &why));
  EXPECT_NE(why.find("elements_per_program"), std::string::npos) << why;

  // Not JSON at all.
  EXPECT_FALSE(check_kernel_directory(directory_with("{not json", "json"), &m, &why));
  EXPECT_NE(why.find("not valid JSON"), std::string::npos) << why;
}

TEST(TritonAot, HipModuleApiFailsCleanlyWithoutRocm) {
  HipModuleApi api;
  std::string why;
  EXPECT_FALSE(resolve_hip_module_api("libamdhip64-absent.so.7", &api, &why));
  EXPECT_NE(why.find("no ROCm runtime"), std::string::npos) << why;
  EXPECT_FALSE(resolve_hip_module_api("libm.so.6", &api, &why));  // loads, but is not HIP
  EXPECT_NE(why.find("lacks hipModuleLoadData"), std::string::npos) << why;
}

// ---- with a CUDA GPU ---------------------------------------------------------------------

class TritonAotGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = &cuda::CudaDriver::instance();
    if (!driver_->usable() || driver_->device_count() == 0) GTEST_SKIP() << "no CUDA device: " << driver_->why_not();
  }
  void* host_alloc(size_t bytes) {  // pinned and mapped: the same address on the device (UVA)
    void* p = nullptr;
    EXPECT_EQ(driver_->api().cuMemAllocHost(&p, bytes), cuda::drv::CUDA_SUCCESS);
    std::memset(p, 0, bytes);
    allocations_.push_back(p);
    return p;
  }
  void TearDown() override {
    for (void* p : allocations_) driver_->api().cuMemFreeHost(p);
  }
  const cuda::CudaDriver* driver_ = nullptr;
  std::vector<void*> allocations_;
};

// Note [scratch probes]: kernels laid out as Triton 3.2 (no trailing pointer),
// 3.3/3.4 (global_scratch) and 3.5+ (global_scratch, profile_scratch) lay out
// theirs: (out, value, trailing...) writing value and each trailing pointer's
// value into out. Written as PTX because only Triton 3.6 is installed here; a
// launch packed with the wrong count reads garbage or faults, so the probe
// checks what the packing hands over.
std::string probe_ptx(int trailing) {
  std::string params = ".param .u64 out, .param .u32 value";
  std::string body =
      "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n"
      "  ld.param.u32 %r1, [value];\n  st.global.u32 [%rd1], %r1;\n";
  for (int i = 0; i < trailing; ++i) {
    params += ", .param .u64 scratch" + std::to_string(i);
    body += "  ld.param.u64 %rd2, [scratch" + std::to_string(i) + "];\n  st.global.u64 [%rd1+" +
            std::to_string(8 + 8 * i) + "], %rd2;\n";
  }
  return ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry probe(" + params +
         ")\n{\n  .reg .b32 %r<2>;\n  .reg .b64 %rd<3>;\n" + body + "  ret;\n}\n";
}

TEST_F(TritonAotGpu, ScratchPointerPackingForZeroOneAndTwoPointers) {
  const auto& api = driver_->api();
  cuda::drv::CUdevice device = 0;
  cuda::drv::CUcontext context = nullptr;
  ASSERT_EQ(api.cuDeviceGet(&device, 0), 0);
  ASSERT_EQ(api.cuDevicePrimaryCtxRetain(&context, device), 0);
  ASSERT_EQ(api.cuCtxSetCurrent(context), 0);
  for (int trailing = 0; trailing <= 2; ++trailing) {
    const std::string ptx = probe_ptx(trailing);
    cuda::drv::CUmodule module = nullptr;
    cuda::drv::CUfunction fn = nullptr;
    ASSERT_EQ(api.cuModuleLoadDataEx(&module, ptx.c_str(), 0, nullptr, nullptr), 0) << ptx;
    ASSERT_EQ(api.cuModuleGetFunction(&fn, module, "probe"), 0);
    auto* out = static_cast<uint64_t*>(host_alloc(32));
    for (int i = 0; i < 4; ++i) out[i] = 0xdeadbeefdeadbeefull;
    uint64_t out_ptr = reinterpret_cast<uint64_t>(out);
    uint32_t value = 1234567u + trailing;
    void* user[] = {&out_ptr, &value};
    std::vector<void*> args = cuda::pack_triton_abi_args(user, trailing);
    ASSERT_EQ(args.size(), 2u + trailing);
    ASSERT_EQ(api.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, args.data(), nullptr), 0);
    ASSERT_EQ(api.cuStreamSynchronize(nullptr), 0);
    EXPECT_EQ(static_cast<uint32_t>(out[0] & 0xffffffffu), value);
    for (int i = 0; i < trailing; ++i) EXPECT_EQ(out[1 + i], 0u) << "trailing pointer " << i << " not null";
    for (int i = trailing; i < 3; ++i) EXPECT_EQ(out[1 + i], 0xdeadbeefdeadbeefull);
    api.cuModuleUnload(module);
  }
}

// The device buffers of one CLM fp32 step, launched through the backend's
// packing (triton_aot_clm_step.h): prepare, pass 1, pass 2, verdict, counter.
struct ClmStep {
  ClmStepBuffers b;
  ClmTensor t;
  ClmScalars s;

  bool launch(const CudaKernels& kernels, std::string* why) const {
    return launch_prepare(kernels, b, nullptr, why) && launch_finite_check(kernels, b, t, s, nullptr, why) &&
           launch_apply(kernels, b, t, s, nullptr, why) && launch_commit(kernels, b, nullptr, why) &&
           launch_advance(kernels, b, nullptr, why);
  }
};

uint64_t address(const void* p) { return reinterpret_cast<uint64_t>(p); }

bool load_built_cuda(const cuda::CudaDriver& driver, CudaKernels* kernels, std::string* why) {
  const std::string dir = built_dir("cuda");
  if (dir.empty() || !std::filesystem::exists(dir + "/manifest.json")) {
    *why = "no Triton AOT build";
    return false;
  }
  cuda::DirectoryArtifactStore store(dir);
  return CudaKernels::load(driver, store, 0, kernels, why);
}

// One CLM step of fp32 parameters run from the Triton cubins (no Python, no
// Triton), against AdamW in float64 under the spec's forward-error contract;
// then a non-finite gradient: nothing written, the verdict in the status word.
TEST_F(TritonAotGpu, ClmStepFromCubinsMatchesFloat64Reference) {
  CudaKernels kernels;
  std::string why;
  if (built_dir("cuda").empty() || !std::filesystem::exists(built_dir("cuda") + "/manifest.json")) {
    GTEST_SKIP() << "no Triton AOT build";
  }
  ASSERT_TRUE(load_built_cuda(*driver_, &kernels, &why)) << why;
  const LoadedKernel* apply = kernels.find("luminav_triton_apply_pf32_gf32");
  ASSERT_NE(apply, nullptr);
  EXPECT_EQ(apply->entry.num_trailing_scratch_ptrs, 2);

  const uint64_t n = 100003;
  ClmStep s;
  s.t.n = static_cast<int64_t>(n);
  auto* x = static_cast<float*>(host_alloc(n * 4));
  auto* g = static_cast<float*>(host_alloc(n * 4));
  auto* m = static_cast<float*>(host_alloc(n * 4));
  auto* v = static_cast<float*>(host_alloc(n * 4));
  auto* step = static_cast<int64_t*>(host_alloc(8));
  auto* hp64 = static_cast<double*>(host_alloc(32));
  auto* counter = static_cast<float*>(host_alloc(4));
  auto* status = static_cast<int32_t*>(host_alloc(16));
  s.t.param = address(x), s.t.grad = address(g), s.t.exp_avg = address(m), s.t.exp_avg_sq = address(v);
  s.b.step = address(step), s.b.hp64 = address(hp64), s.b.counter = address(counter), s.b.status = address(status);
  s.b.k = address(host_alloc(64)), s.b.words = address(host_alloc(8)), s.b.gl = address(host_alloc(16));
  s.b.unused = address(host_alloc(16));
  s.b.partials = address(host_alloc(clm_partials_bytes(kernels, s.t.n)));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (uint64_t i = 0; i < n; ++i) {
    x[i] = normal(rng);
    g[i] = 0.1f * normal(rng);
    m[i] = 0.01f * normal(rng);
    v[i] = 1e-4f * std::fabs(normal(rng));
  }
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  hp64[0] = b1, hp64[1] = b2, hp64[2] = wd, hp64[3] = lr;
  *counter = 4.0f;  // t = 5
  s.s = ClmScalars{static_cast<float>(b1), static_cast<float>(1.0 - b1), static_cast<float>(b2),
                   static_cast<float>(1.0 - b2), static_cast<float>(eps)};
  std::vector<float> x0(x, x + n), m0(m, m + n), v0(v, v + n);
  ASSERT_TRUE(s.launch(kernels, &why)) << why;
  ASSERT_EQ(driver_->api().cuStreamSynchronize(nullptr), cuda::drv::CUDA_SUCCESS);
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(*counter, 5.0f);
  EXPECT_EQ(*step, 5);
  // spec "Accuracy contract": float64 AdamW from the fp32 state and fp32 constants.
  const double t = 5, f1 = static_cast<float>(b1), f2 = static_cast<float>(b2);
  const double om1 = static_cast<float>(1.0 - b1), om2 = static_cast<float>(1.0 - b2);
  const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  const double decay = static_cast<float>(1.0 - lr * wd), lr32 = static_cast<float>(lr);
  const double eps32 = static_cast<float>(eps);
  uint64_t bad_m = 0, bad_v = 0, bad_x = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double gi = g[i];
    const double mr = f1 * m0[i] + om1 * gi, vr = f2 * v0[i] + om2 * gi * gi;
    const double den = std::sqrt(vr / bc2) + eps32;
    const double xr = x0[i] * decay - lr32 * (mr / bc1) / den;
    const double sm = f1 * std::fabs(m0[i]) + om1 * std::fabs(gi), sv = vr;
    const double sx = std::fabs(x0[i]) * decay + lr32 * (sm / bc1) / den;
    bad_m += std::fabs(m[i] - mr) > 1e-6 * sm;
    bad_v += std::fabs(v[i] - vr) > 1e-6 * sv;
    bad_x += std::fabs(x[i] - xr) > 1e-6 * sx;
  }
  EXPECT_EQ(bad_m, 0u);
  EXPECT_EQ(bad_v, 0u);
  EXPECT_EQ(bad_x, 0u);

  // A NaN gradient: the device refuses the step before writing anything.
  std::vector<float> x1(x, x + n), m1(m, m + n), v1(v, v + n);
  g[n / 3] = std::nanf("");
  ASSERT_TRUE(s.launch(kernels, &why)) << why;
  ASSERT_EQ(driver_->api().cuStreamSynchronize(nullptr), cuda::drv::CUDA_SUCCESS);
  EXPECT_EQ(status[0], 1);  // 1 + position of the tensor
  EXPECT_EQ(status[1], 1);  // sticky failure
  EXPECT_EQ(*counter, 5.0f);
  EXPECT_EQ(std::memcmp(x, x1.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(m, m1.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(v, v1.data(), n * 4), 0);
}

// The AOT step's time at LUMINAV_TRITON_AOT_BENCH_N elements in device memory
// (zeroed buffers: the same bytes move); printed for docs/benchmarks.md.
TEST_F(TritonAotGpu, StepTimeAtBenchSize) {
  const char* size = std::getenv("LUMINAV_TRITON_AOT_BENCH_N");
  if (size == nullptr) GTEST_SKIP() << "set LUMINAV_TRITON_AOT_BENCH_N to time the AOT step";
  CudaKernels kernels;
  std::string why;
  ASSERT_TRUE(load_built_cuda(*driver_, &kernels, &why)) << why;
  const auto& api = driver_->api();
  ClmStep s;
  s.t.n = std::atoll(size);
  std::vector<cuda::drv::CUdeviceptr> buffers;
  auto device = [&](size_t bytes) {
    cuda::drv::CUdeviceptr p = 0;
    EXPECT_EQ(api.cuMemAlloc(&p, bytes), cuda::drv::CUDA_SUCCESS);
    EXPECT_EQ(api.cuMemsetD8Async(p, 0, bytes, nullptr), cuda::drv::CUDA_SUCCESS);
    buffers.push_back(p);
    return static_cast<uint64_t>(p);
  };
  const size_t bytes = static_cast<size_t>(s.t.n) * 4;
  s.t.param = device(bytes), s.t.grad = device(bytes), s.t.exp_avg = device(bytes), s.t.exp_avg_sq = device(bytes);
  s.b.k = device(64), s.b.step = device(8), s.b.counter = device(4), s.b.status = device(16), s.b.words = device(8);
  s.b.gl = device(16), s.b.unused = device(16);
  s.b.partials = device(clm_partials_bytes(kernels, s.t.n));
  auto* hp64 = static_cast<double*>(host_alloc(32));
  hp64[0] = 0.9, hp64[1] = 0.999, hp64[2] = 0.01, hp64[3] = 1e-3;
  s.b.hp64 = address(hp64);
  std::vector<double> ms;
  for (int rep = 0; rep < 13; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(s.launch(kernels, &why)) << why;
    ASSERT_EQ(api.cuStreamSynchronize(nullptr), cuda::drv::CUDA_SUCCESS);
    const auto t1 = std::chrono::steady_clock::now();
    if (rep >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  std::printf("triton-aot CLM fp32 step, N=%lld: median %.3f ms over %zu steps, %.0f GB/s at 32 B/element\n",
              static_cast<long long>(s.t.n), median, ms.size(), 32.0 * s.t.n / (median * 1e-3) / 1e9);
  for (cuda::drv::CUdeviceptr p : buffers) api.cuMemFree(p);
}

}  // namespace
}  // namespace luminav::triton_aot
