// Argument packing of the Triton AOT TD-CLM kernels (signatures of build_triton_aot.py).
#include "optim/triton/triton_aot_tdclm_step.h"

namespace luminav::triton_aot {
namespace {

// Note [Triton factor tiles] (triton_kernels.py; build_triton_aot.py's SUMS_TILES and the FACTOR_*
// constants, which name the kernels): a sums program reads kChunkRows rows by kWideCols columns of
// an fp32 gradient, kWideCols2B of a bf16 one (kNarrowCols where C < kWideFrom); the factor kernels
// take kRowBlock rows / kColBlock columns a program.
constexpr int64_t kChunkRows = 128, kWideCols = 128, kWideCols2B = 256, kNarrowCols = 16, kWideFrom = 128;
constexpr int64_t kRowBlock = 256, kColBlock = 256;



// Note [aligned variants]: the sums index the gradient as r * C + c, so their hints need the
// gradient's address, R and C to be multiples of 16, and the partials' addresses too (the hint that keeps
// the fp32 tile's registers at 2 warps: FACTOR_ALIGNED_ARGS in build_triton_aot.py); pass 2's also hold R
// (`rows`) to it.
bool factor_aligned(const TdclmTensor& t, const TdclmScratch& sc) {
  const bool partials = sc.row_partials % 16 == 0 && (t.form != TdclmForm::kFactored || sc.col_partials % 16 == 0);
  return t.t.grad % 16 == 0 && t.rows % 16 == 0 && t.cols % 16 == 0 && partials;
}
bool apply_aligned(const TdclmTensor& t) { return aligned16(t.t) && t.rows % 16 == 0; }

const char* gradient(const TdclmTensor& t) { return t.t.bf16 ? "gbf16" : "gf32"; }
const char* form_name(TdclmForm f) {
  return f == TdclmForm::kTensor ? "tensor" : f == TdclmForm::kRow ? "row" : "factored";
}
std::string tile_name(int64_t cols) { return std::to_string(kChunkRows) + "x" + std::to_string(cols); }

}  // namespace

int64_t tile_cols(const TdclmTensor& t) {
  return t.cols < kWideFrom ? kNarrowCols : t.t.bf16 ? kWideCols2B : kWideCols;
}
int64_t strips(const TdclmTensor& t) { return ceil_div(t.cols, tile_cols(t)); }
int64_t chunks(const TdclmTensor& t) { return ceil_div(t.rows, kChunkRows); }
int64_t row_blocks(const TdclmTensor& t) { return ceil_div(t.rows, kRowBlock); }
int64_t col_blocks(const TdclmTensor& t) { return ceil_div(t.cols, kColBlock); }
std::string sums_tile_name(const TdclmTensor& t) { return tile_name(tile_cols(t)); }

#define LUMINAV_SUMS_SIG(g)                                                                                  \
  "(g_ptr:" g ", row_part_ptr:*fp64, col_part_ptr:*fp64, k_ptr:*fp32, words_ptr:*i32, rows:i64, cols:i64, " \
  "position:i64, with_cols:i64)"
#define LUMINAV_FACTOR_ROWS_SIG                                                                                \
  "(row_part_ptr:*fp64, exp_avg_sq_ptr:*fp32, new_ptr:*fp32, block_sums_ptr:*fp64, words_ptr:*i32, rows:i64, " \
  "cols:i64, strips:i64, beta2:fp32, one_minus_beta2:fp32)"
#define LUMINAV_FACTOR_COLS_SIG                                                                              \
  "(col_part_ptr:*fp64, block_sums_ptr:*fp64, exp_avg_sq_ptr:*fp32, new_ptr:*fp32, gl_ptr:*fp32, "           \
  "words_ptr:*i32, rows:i64, cols:i64, form_cols:i64, chunks:i64, row_blocks:i64, beta2:fp32, "              \
  "one_minus_beta2:fp32)"
#define LUMINAV_APPLY_F32 "(p_ptr:*fp32, g_ptr:*fp32, " LUMINAV_TRITON_APPLY_SIG
#define LUMINAV_APPLY_BF16 "(p_ptr:*i16, g_ptr:*i16, " LUMINAV_TRITON_APPLY_SIG

const AotKernelAbi kTdclmKernelSet[kTdclmKernelCount] = {
    {"luminav_triton_finalize_tensor", LUMINAV_TRITON_FINALIZE_SIG},
    {"luminav_triton_factor_rows", LUMINAV_FACTOR_ROWS_SIG},
    {"luminav_triton_factor_cols", LUMINAV_FACTOR_COLS_SIG},
    {"luminav_triton_apply_pf32_gf32_tensor", LUMINAV_APPLY_F32},
    {"luminav_triton_apply_pf32_gf32_row", LUMINAV_APPLY_F32},
    {"luminav_triton_apply_pf32_gf32_factored", LUMINAV_APPLY_F32},
    {"luminav_triton_apply_pbf16_gbf16_tensor", LUMINAV_APPLY_BF16},
    {"luminav_triton_apply_pbf16_gbf16_row", LUMINAV_APPLY_BF16},
    {"luminav_triton_apply_pbf16_gbf16_factored", LUMINAV_APPLY_BF16},
    {"luminav_triton_apply_pf32_gf32_tensor_a16", LUMINAV_APPLY_F32},
    {"luminav_triton_apply_pf32_gf32_row_a16", LUMINAV_APPLY_F32},
    {"luminav_triton_apply_pf32_gf32_factored_a16", LUMINAV_APPLY_F32},
    {"luminav_triton_apply_pbf16_gbf16_tensor_a16", LUMINAV_APPLY_BF16},
    {"luminav_triton_apply_pbf16_gbf16_row_a16", LUMINAV_APPLY_BF16},
    {"luminav_triton_apply_pbf16_gbf16_factored_a16", LUMINAV_APPLY_BF16},
    {"luminav_triton_factor_sums_gf32_128x128", LUMINAV_SUMS_SIG("*fp32")},
    {"luminav_triton_factor_sums_gf32_128x16", LUMINAV_SUMS_SIG("*fp32")},
    {"luminav_triton_factor_sums_gbf16_128x256", LUMINAV_SUMS_SIG("*i16")},
    {"luminav_triton_factor_sums_gbf16_128x16", LUMINAV_SUMS_SIG("*i16")},
    {"luminav_triton_factor_sums_gf32_128x128_a16", LUMINAV_SUMS_SIG("*fp32")},
    {"luminav_triton_factor_sums_gf32_128x16_a16", LUMINAV_SUMS_SIG("*fp32")},
    {"luminav_triton_factor_sums_gbf16_128x256_a16", LUMINAV_SUMS_SIG("*i16")},
    {"luminav_triton_factor_sums_gbf16_128x16_a16", LUMINAV_SUMS_SIG("*i16")},
};
#undef LUMINAV_SUMS_SIG
#undef LUMINAV_FACTOR_ROWS_SIG
#undef LUMINAV_FACTOR_COLS_SIG
#undef LUMINAV_APPLY_F32
#undef LUMINAV_APPLY_BF16

bool check_elements_per_program(const cuda::KernelManifest& manifest, std::string_view name, uint64_t want,
                                std::string* why) {
  const cuda::KernelEntry* k = manifest.find_kernel(name);
  if (k != nullptr && k->elements_per_program == want) return true;
  *why = "manifest: kernel " + std::string(name) + " covers " +
         (k ? std::to_string(k->elements_per_program) : std::string("no")) +
         " elements per program, this library launches it for " + std::to_string(want) +
         " (kernels from another build?)";
  return false;
}

bool check_factor_tiles(const cuda::KernelManifest& manifest, std::span<const AotKernelAbi> set, std::string* why) {
  // The build records a kernel's tile as its elements_per_program (a sums kernel: the product of the
  // shape its name gives; the factor kernels: rows or columns a program), which the grids assume.
  for (const AotKernelAbi& abi : set) {
    uint64_t want = 0;
    if (abi.name.find("_sums_") != std::string_view::npos) {
      for (const int64_t cols : {kWideCols, kWideCols2B, kNarrowCols}) {
        const std::string tile = "_" + tile_name(cols);
        const size_t at = abi.name.find(tile);
        const size_t end = at + tile.size();
        if (at != std::string_view::npos && (end == abi.name.size() || abi.name[end] == '_')) {
          want = static_cast<uint64_t>(kChunkRows * cols);
        }
      }
    } else if (abi.name.ends_with("_rows")) {
      want = kRowBlock;
    } else if (abi.name.ends_with("_cols")) {
      want = kColBlock;
    } else {
      continue;
    }
    if (!check_elements_per_program(manifest, abi.name, want, why)) return false;
  }
  return true;
}

bool check_tdclm_kernel_set(const cuda::KernelManifest& manifest, std::string* why) {
  return check_kernel_set(manifest, kTdclmKernelSet, why) && check_factor_tiles(manifest, kTdclmKernelSet, why);
}

size_t tdclm_partials_bytes(const CudaKernels& kernels, const TdclmTensor& t) {
  if (t.form == TdclmForm::kTensor) return clm_partials_bytes(kernels, t.t.n);
  return static_cast<size_t>(row_blocks(t)) * sizeof(double);  // factor_rows' block sums
}

size_t tdclm_row_partials_bytes(const TdclmTensor& t) {
  return t.form == TdclmForm::kTensor ? 0 : static_cast<size_t>(strips(t) * t.rows) * sizeof(double);
}

size_t tdclm_col_partials_bytes(const TdclmTensor& t) {
  if (t.form != TdclmForm::kFactored) return 0;
  return static_cast<size_t>(chunks(t) * t.cols) * sizeof(double);
}

size_t tdclm_region_bytes(const TdclmTensor& t) {
  const int64_t factors = t.form == TdclmForm::kFactored ? t.rows + 2 * t.cols
                          : t.form == TdclmForm::kRow   ? t.rows
                                                        : 1;
  return static_cast<size_t>(4 + ceil_div(factors, 4) * 4) * sizeof(float);
}

std::string tdclm_sums_kernel(const TdclmTensor& t, const TdclmScratch& scratch) {
  return std::string("luminav_triton_factor_sums_") + gradient(t) + "_" + tile_name(tile_cols(t)) +
         (factor_aligned(t, scratch) ? "_a16" : "");
}

std::string tdclm_apply_kernel(const TdclmTensor& t) {
  return std::string("luminav_triton_apply_") + (t.t.bf16 ? "pbf16_gbf16_" : "pf32_gf32_") + form_name(t.form) +
         (apply_aligned(t) ? "_a16" : "");
}

bool launch_tdclm_round0(const CudaKernels& kernels, const ClmStepBuffers& b, const TdclmScratch& scratch,
                         const TdclmTensor& t, const ClmScalars& s, cuda::drv::CUstream stream, std::string* why) {
  ClmStepBuffers v = b;
  TdclmScratch sc = scratch;
  TdclmTensor x = t;
  ClmScalars c = s;
  if (x.form == TdclmForm::kTensor) {
    int64_t num_partials = 0, one = 1;
    float bound_ratio = 0.0f;
    if (!launch_grad_sums(kernels, b, x.t, s, stream, &num_partials, why)) return false;
    // (the finalize's factor arguments are not read for the tensor form: the region stands in)
    void* finalize_args[] = {&v.partials, &num_partials, &x.gl, &v.words, &v.k, &x.t.exp_avg_sq, &x.factors,
                             &x.factors, &x.factors, &x.t.n, &x.rows, &x.cols, &one, &x.t.position, &c.beta2,
                             &c.one_minus_beta2, &bound_ratio};
    return kernels.launch("luminav_triton_finalize_tensor", 1, finalize_args, stream, why);
  }
  // Note [Triton factor tiles]: the gradient read once (row and column partials, the verdict), then
  // the row factors (and their block sums, b.partials) and rho with the column factors.
  const bool factored = x.form == TdclmForm::kFactored;
  int64_t with_cols = factored ? 1 : 0, n_strips = strips(x), n_chunks = factored ? chunks(x) : 0;
  int64_t form_cols = factored ? x.cols : 0, n_row_blocks = row_blocks(x);
  uint64_t col_part_arg = factored ? sc.col_partials : sc.row_partials;  // (not written for the row form)
  void* sums_args[] = {&x.t.grad, &sc.row_partials, &col_part_arg, &v.k, &v.words, &x.rows, &x.cols, &x.t.position,
                       &with_cols};
  if (!kernels.launch(tdclm_sums_kernel(x, sc), static_cast<unsigned>(chunks(x) * n_strips), sums_args, stream, why)) {
    return false;
  }
  void* rows_args[] = {&sc.row_partials, &x.t.exp_avg_sq, &x.factors, &v.partials, &v.words, &x.rows, &x.cols,
                       &n_strips, &c.beta2, &c.one_minus_beta2};
  if (!kernels.launch("luminav_triton_factor_rows", static_cast<unsigned>(n_row_blocks), rows_args, stream, why)) {
    return false;
  }
  void* cols_args[] = {&col_part_arg, &v.partials, &x.t.exp_avg_sq, &x.factors, &x.gl, &v.words, &x.rows, &x.cols,
                       &form_cols, &n_chunks, &n_row_blocks, &c.beta2, &c.one_minus_beta2};
  const unsigned col_programs = factored ? static_cast<unsigned>(col_blocks(x)) : 1u;
  return kernels.launch("luminav_triton_factor_cols", col_programs, cols_args, stream, why);
}

bool launch_tdclm_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const TdclmTensor& t,
                        const ClmScalars& s, cuda::drv::CUstream stream, std::string* why) {
  return launch_apply_kernel(kernels, tdclm_apply_kernel(t), b, t.t, s, ApplyMoments{t.gl, t.factors, t.rows, t.cols},
                             stream, why);
}

}  // namespace luminav::triton_aot
