// The batches of triton-aot's steps and their launches (Note [AOT tensor tables] in
// build_triton_aot.py; the table layouts are triton_kernels.py's).
#include "optim/triton/triton_aot_batches.h"

#include <array>
#include <cstring>
#include <map>
#include <tuple>

namespace luminav::triton_aot {
namespace {

// triton_kernels.py: REDUCE_BLOCK and APPLY_BLOCK (the CLM tables' programs; check_batch_kernel_set holds
// the manifest to them), TABLE_FIELDS (Note [tensor tables]) and the FT_ fields of Note [factored tables].
constexpr int64_t kReduceBlock = 4096, kApplyBlock = 1024;
constexpr size_t kTableFields = 9;
enum Factored : size_t {
  kSumsFirst, kRowsFirst, kColsFirst, kApplyFirst, kRows, kCols, kPosition, kRowPart, kColPart, kBlockSums, kNew,
  kGl, kParam, kExpAvg, kExpAvgSq, kMaster, kSeed, kIndexOffset, kStrips, kChunks, kRowBlocks, kApplyPrograms,
  kFactoredFields
};
static_assert(kFactoredFields == 22);

size_t round16(size_t bytes) { return (bytes + 15) / 16 * 16; }

bool factored_member(const StepTensor& s) { return s.tdclm && s.t.form == TdclmForm::kFactored; }

// What a batch's tensors share (its class), or nothing for a tensor stepped on its own.
using BatchClass = std::tuple<size_t, bool, bool, int64_t>;  // group, factored, bf16, sums tile columns
bool class_of(const StepTensor& s, BatchClass* out) {
  if (s.t.t.n == 0 || (s.tdclm && !factored_member(s))) return false;
  *out = {s.group, s.tdclm, s.t.t.bf16, s.tdclm ? tile_cols(s.t) : 0};
  return true;
}

// The addresses a table row holds besides the gradient's: param, exp_avg, exp_avg_sq, the master
// (the parameter's own where it has none: the fp32 variants read none).
std::array<uint64_t, 4> fixed_addresses(const ClmTensor& t) {
  return {t.param, t.exp_avg, t.exp_avg_sq, t.master != 0 ? t.master : t.param};
}

// Each stage's program count of a member.
std::array<int64_t, 4> programs(const TensorBatch& b, const StepTensor& s) {
  if (!b.factored) return {ceil_div(s.t.t.n, kReduceBlock), ceil_div(s.t.t.n, kApplyBlock), 0, 0};
  return {chunks(s.t) * strips(s.t), row_blocks(s.t), col_blocks(s.t), ceil_div(s.t.t.n, kApplyBlock)};
}

// A factored member's own scratch (fp64): its row partials, column partials and block sums, each at a
// multiple of 16 bytes from the start (the row partials at 0).
struct FactorScratch {
  size_t col_part = 0, block_sums = 0, bytes = 0;
};
FactorScratch factor_scratch(const TdclmTensor& t) {
  FactorScratch f;
  f.col_part = round16(static_cast<size_t>(strips(t) * t.rows) * sizeof(double));
  f.block_sums = f.col_part + round16(static_cast<size_t>(chunks(t) * t.cols) * sizeof(double));
  f.bytes = f.block_sums + round16(static_cast<size_t>(row_blocks(t)) * sizeof(double));
  return f;
}

bool gradients_aligned(const TensorBatch& b, std::span<const StepTensor> tensors) {
  for (size_t m : b.members) {
    if (tensors[m].t.t.grad % 16 != 0) return false;
  }
  return true;
}

const char* pair_name(bool bf16) { return bf16 ? "pbf16_gbf16" : "pf32_gf32"; }
const char* gradient_name(bool bf16) { return bf16 ? "gbf16" : "gf32"; }

}  // namespace

BatchPlan plan_batches(std::span<const StepTensor> tensors) {
  BatchPlan plan;
  plan.in_batch.assign(tensors.size(), 0);
  plan.scratch_offset.assign(tensors.size(), 0);
  std::map<BatchClass, std::vector<size_t>> classes;
  std::vector<BatchClass> order;  // classes in the order of their first tensor
  for (size_t j = 0; j < tensors.size(); ++j) {
    BatchClass c;
    if (!class_of(tensors[j], &c)) continue;
    auto [it, fresh] = classes.try_emplace(c);
    if (fresh) order.push_back(c);
    it->second.push_back(j);
  }
  for (const BatchClass& c : order) {
    std::vector<size_t>& members = classes[c];
    if (members.size() < 2) continue;
    TensorBatch b;
    b.group = std::get<0>(c);
    b.factored = std::get<1>(c);
    b.members = std::move(members);
    b.first_gradient = plan.gradients;
    plan.gradients += b.members.size();
    b.fixed_aligned = true;
    for (size_t m : b.members) {
      const StepTensor& s = tensors[m];
      plan.in_batch[m] = 1;
      uint64_t any = s.t.t.n;
      for (uint64_t a : fixed_addresses(s.t.t)) any |= a;
      if (b.factored) any |= static_cast<uint64_t>(s.t.cols);
      b.fixed_aligned = b.fixed_aligned && any % 16 == 0;
      const std::array<int64_t, 4> p = programs(b, s);
      for (size_t stage = 0; stage < 4; ++stage) b.programs[stage] += static_cast<unsigned>(p[stage]);
      if (b.factored) {
        plan.scratch_offset[m] = plan.scratch_bytes;
        plan.scratch_bytes += factor_scratch(s.t).bytes;
      }
    }
    const size_t rows = b.members.size() * (b.factored ? kFactoredFields : kTableFields) * sizeof(int64_t);
    for (size_t i = 0; i < (b.factored ? 1u : 2u); ++i) {
      b.tables[i] = plan.table_bytes;
      plan.table_bytes += round16(rows);
    }
    for (size_t stage = 0; stage < (b.factored ? 4u : 2u); ++stage) {
      b.maps[stage] = plan.table_bytes;
      plan.table_bytes += round16(b.programs[stage] * sizeof(int32_t));
    }
    plan.batches.push_back(std::move(b));
  }
  return plan;
}

std::vector<uint64_t> batch_key(std::span<const StepTensor> tensors) {
  std::vector<uint64_t> key;
  key.reserve(tensors.size() * 12);
  for (const StepTensor& s : tensors) {
    const ClmTensor& t = s.t.t;
    const uint64_t kind = (s.tdclm ? 1u + static_cast<unsigned>(s.t.form) : 0u) | (t.bf16 ? 16u : 0u);
    for (uint64_t v : {kind, static_cast<uint64_t>(s.group), static_cast<uint64_t>(t.n),
                       static_cast<uint64_t>(s.t.rows), static_cast<uint64_t>(s.t.cols), t.param, t.exp_avg,
                       t.exp_avg_sq, t.master, static_cast<uint64_t>(t.seed), static_cast<uint64_t>(t.index_offset),
                       static_cast<uint64_t>(t.position)}) {
      key.push_back(v);
    }
  }
  return key;
}

std::vector<uint8_t> batch_tables(const BatchPlan& plan, std::span<const StepTensor> tensors, uint64_t scratch) {
  std::vector<uint8_t> image(plan.table_bytes, 0);
  const auto put = [&image](size_t at, const auto& value) { std::memcpy(image.data() + at, &value, sizeof value); };
  for (const TensorBatch& b : plan.batches) {
    std::array<int64_t, 4> first{};  // each stage's first program of the member
    for (size_t i = 0; i < b.members.size(); ++i) {
      const StepTensor& s = tensors[b.members[i]];
      const ClmTensor& t = s.t.t;
      const std::array<uint64_t, 4> fixed = fixed_addresses(t);
      const std::array<int64_t, 4> count = programs(b, s);
      for (size_t stage = 0; stage < 4; ++stage) {  // the tensor of each of its programs
        for (int64_t p = 0; p < count[stage]; ++p) put(b.maps[stage] + (first[stage] + p) * 4, static_cast<int32_t>(i));
      }
      if (!b.factored) {
        for (size_t table = 0; table < 2; ++table) {
          const int64_t row[kTableFields] = {first[table], t.n, static_cast<int64_t>(fixed[0]),
                                             static_cast<int64_t>(fixed[1]), static_cast<int64_t>(fixed[2]),
                                             static_cast<int64_t>(fixed[3]), t.seed, t.index_offset, t.position};
          std::memcpy(image.data() + b.tables[table] + i * sizeof row, row, sizeof row);
        }
      } else {
        const uint64_t row_part = scratch + plan.scratch_offset[b.members[i]];
        const FactorScratch own = factor_scratch(s.t);
        int64_t row[kFactoredFields] = {};
        for (size_t stage = 0; stage < 4; ++stage) row[kSumsFirst + stage] = first[stage];
        row[kRows] = s.t.rows, row[kCols] = s.t.cols, row[kPosition] = t.position;
        row[kRowPart] = static_cast<int64_t>(row_part);
        row[kColPart] = static_cast<int64_t>(row_part + own.col_part);
        row[kBlockSums] = static_cast<int64_t>(row_part + own.block_sums);
        row[kNew] = static_cast<int64_t>(s.t.factors), row[kGl] = static_cast<int64_t>(s.t.gl);
        for (size_t a = 0; a < 4; ++a) row[kParam + a] = static_cast<int64_t>(fixed[a]);
        row[kSeed] = t.seed, row[kIndexOffset] = t.index_offset;
        row[kStrips] = strips(s.t), row[kChunks] = chunks(s.t), row[kRowBlocks] = row_blocks(s.t);
        row[kApplyPrograms] = count[3];
        std::memcpy(image.data() + b.tables[0] + i * sizeof row, row, sizeof row);
      }
      for (size_t stage = 0; stage < 4; ++stage) first[stage] += count[stage];
    }
  }
  return image;
}

std::vector<uint64_t> batch_gradients(const BatchPlan& plan, std::span<const StepTensor> tensors) {
  std::vector<uint64_t> out(plan.gradients);
  for (const TensorBatch& b : plan.batches) {
    for (size_t i = 0; i < b.members.size(); ++i) out[b.first_gradient + i] = tensors[b.members[i]].t.t.grad;
  }
  return out;
}

std::string batch_round0_kernel(const TensorBatch& batch, std::span<const StepTensor> tensors) {
  const StepTensor& s = tensors[batch.members.front()];
  const char* aligned = batch.fixed_aligned && gradients_aligned(batch, tensors) ? "_a16" : "";
  if (!batch.factored) return std::string("luminav_triton_multi_finite_check_") + gradient_name(s.t.t.bf16) + aligned;
  return std::string("luminav_triton_multi_factored_sums_") + gradient_name(s.t.t.bf16) + "_" + sums_tile_name(s.t) +
         aligned;
}

std::string batch_apply_kernel(const TensorBatch& batch, std::span<const StepTensor> tensors) {
  const char* aligned = batch.fixed_aligned && gradients_aligned(batch, tensors) ? "_a16" : "";
  return std::string(batch.factored ? "luminav_triton_multi_factored_apply_" : "luminav_triton_multi_apply_") +
         pair_name(tensors[batch.members.front()].t.t.bf16) + aligned;
}

bool launch_batch_round0(const CudaKernels& kernels, const ClmStepBuffers& b, const BatchBuffers& buffers,
                         const TensorBatch& batch, std::span<const StepTensor> tensors, cuda::drv::CUstream stream,
                         std::string* why) {
  ClmStepBuffers v = b;
  ClmScalars c = tensors[batch.members.front()].s;
  uint64_t table = buffers.tables + batch.tables[0];
  uint64_t gradients = buffers.gradients + batch.first_gradient * sizeof(uint64_t);
  uint64_t map0 = buffers.tables + batch.maps[0];
  void* first_args[] = {&table, &gradients, &map0, &v.k, &v.words};  // the finite check's or the sums'
  if (!kernels.launch(batch_round0_kernel(batch, tensors), batch.programs[0], first_args, stream, why)) return false;
  if (!batch.factored) return true;
  uint64_t rows_map = buffers.tables + batch.maps[1], cols_map = buffers.tables + batch.maps[2];
  void* rows_args[] = {&table, &rows_map, &v.words, &c.beta2, &c.one_minus_beta2};
  void* cols_args[] = {&table, &cols_map, &v.words, &c.beta2, &c.one_minus_beta2};
  return kernels.launch("luminav_triton_multi_factored_rows", batch.programs[1], rows_args, stream, why) &&
         kernels.launch("luminav_triton_multi_factored_cols", batch.programs[2], cols_args, stream, why);
}

bool launch_batch_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const BatchBuffers& buffers,
                        const TensorBatch& batch, std::span<const StepTensor> tensors, cuda::drv::CUstream stream,
                        std::string* why) {
  ClmStepBuffers v = b;
  ClmScalars c = tensors[batch.members.front()].s;
  FixedScalars f;
  const size_t stage = batch.factored ? 3 : 1;
  uint64_t table = buffers.tables + batch.tables[batch.factored ? 0 : 1];
  uint64_t gradients = buffers.gradients + batch.first_gradient * sizeof(uint64_t);
  uint64_t map = buffers.tables + batch.maps[stage];
  void* args[] = {&table, &gradients, &map, &v.k, &v.step, &v.words, &c.beta1, &c.one_minus_beta1, &c.beta2,
                  &c.one_minus_beta2, &c.eps, &f.lam, &f.one_minus_lam, &f.tau, &f.bound_ratio};
  return kernels.launch(batch_apply_kernel(batch, tensors), batch.programs[stage], args, stream, why);
}

#define LUMINAV_MULTI_CHECK_SIG \
  "(table_ptr:*i64, grad_table_ptr:*i64, program_map_ptr:*i32, k_ptr:*fp32, words_ptr:*i32)"
#define LUMINAV_MULTI_FACTOR_SIG \
  "(table_ptr:*i64, program_map_ptr:*i32, words_ptr:*i32, beta2:fp32, one_minus_beta2:fp32)"
#define LUMINAV_MULTI_APPLY_SIG                                                                                  \
  "(table_ptr:*i64, grad_table_ptr:*i64, program_map_ptr:*i32, k_ptr:*fp32, step_ptr:*i64, words_ptr:*i32, "     \
  "beta1:fp32, one_minus_beta1:fp32, beta2:fp32, one_minus_beta2:fp32, eps:fp32, lam:fp32, one_minus_lam:fp32, " \
  "tau:fp32, bound_ratio:fp32)"
#define LUMINAV_MULTI_ALIGNMENTS(name, sig) {name, sig}, {name "_a16", sig}

const AotKernelAbi kBatchKernelSet[kBatchKernelCount] = {
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_finite_check_gf32", LUMINAV_MULTI_CHECK_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_finite_check_gbf16", LUMINAV_MULTI_CHECK_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_factored_sums_gf32_128x128", LUMINAV_MULTI_CHECK_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_factored_sums_gf32_128x16", LUMINAV_MULTI_CHECK_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_factored_sums_gbf16_128x256", LUMINAV_MULTI_CHECK_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_factored_sums_gbf16_128x16", LUMINAV_MULTI_CHECK_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_apply_pf32_gf32", LUMINAV_MULTI_APPLY_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_apply_pbf16_gbf16", LUMINAV_MULTI_APPLY_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_factored_apply_pf32_gf32", LUMINAV_MULTI_APPLY_SIG),
    LUMINAV_MULTI_ALIGNMENTS("luminav_triton_multi_factored_apply_pbf16_gbf16", LUMINAV_MULTI_APPLY_SIG),
    {"luminav_triton_multi_factored_rows", LUMINAV_MULTI_FACTOR_SIG},
    {"luminav_triton_multi_factored_cols", LUMINAV_MULTI_FACTOR_SIG},
};
#undef LUMINAV_MULTI_CHECK_SIG
#undef LUMINAV_MULTI_FACTOR_SIG
#undef LUMINAV_MULTI_APPLY_SIG
#undef LUMINAV_MULTI_ALIGNMENTS

bool check_batch_kernel_set(const cuda::KernelManifest& manifest, std::string* why) {
  if (!check_kernel_set(manifest, kBatchKernelSet, why) || !check_factor_tiles(manifest, kBatchKernelSet, why)) {
    return false;
  }
  for (const AotKernelAbi& abi : kBatchKernelSet) {  // the CLM maps' programs (plan_batches)
    const bool check = abi.name.find("finite_check") != std::string_view::npos;
    const bool apply = abi.name.find("apply") != std::string_view::npos;
    if ((check || apply) &&
        !check_elements_per_program(manifest, abi.name, static_cast<uint64_t>(check ? kReduceBlock : kApplyBlock),
                                    why)) {
      return false;
    }
  }
  return true;
}

}  // namespace luminav::triton_aot
