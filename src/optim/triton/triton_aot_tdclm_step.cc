// Argument packing of the Triton AOT TD-CLM kernels (signatures of build_triton_aot.py).
#include "optim/triton/triton_aot_tdclm_step.h"

namespace luminav::triton_aot {
namespace {

// The tiles of the row and column sums (build_triton_aot.py's ROW_TILES, COL_TILES and
// FACTOR_CHUNK_ROWS, which name the kernels): rows x columns per program. C >= kWideFrom takes the
// wide tiles (a row-sum program then covers 4 rows of 1024 columns), smaller C the narrow ones.
struct Tile {
  int64_t rows, cols;
};
constexpr Tile kRowWide{4, 1024}, kRowNarrow{256, 16}, kColWide{32, 128}, kColNarrow{256, 16};
constexpr int64_t kChunkRows = 256;
constexpr int64_t kWideFrom = 256;
constexpr int kPartialFields = 5;  // triton_kernels.PARTIAL_FIELDS

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Tile row_tile(const TdclmTensor& t) { return t.cols >= kWideFrom ? kRowWide : kRowNarrow; }
Tile col_tile(const TdclmTensor& t) { return t.cols >= kWideFrom ? kColWide : kColNarrow; }

// Note [aligned variants]: the sums index the gradient as r * C + c, so their hints need the
// gradient's address, R and C to be multiples of 16; pass 2's also hold R (`rows`) to it.
bool factor_aligned(const TdclmTensor& t) { return t.t.grad % 16 == 0 && t.rows % 16 == 0 && t.cols % 16 == 0; }
bool apply_aligned(const TdclmTensor& t) { return aligned16(t.t) && t.rows % 16 == 0; }

const char* gradient(const TdclmTensor& t) { return t.t.bf16 ? "gbf16" : "gf32"; }
const char* form_name(TdclmForm f) {
  return f == TdclmForm::kTensor ? "tensor" : f == TdclmForm::kRow ? "row" : "factored";
}
std::string tile_name(Tile tile) { return std::to_string(tile.rows) + "x" + std::to_string(tile.cols); }

}  // namespace

#define LUMINAV_ROW_SUMS_SIG(g) \
  "(g_ptr:" g ", row_sums_ptr:*fp64, partials_ptr:*fp64, k_ptr:*fp32, words_ptr:*i32, rows:i64, cols:i64)"
#define LUMINAV_COL_SUMS_SIG(g) "(g_ptr:" g ", col_sums_ptr:*fp64, k_ptr:*fp32, words_ptr:*i32, rows:i64, cols:i64)"
#define LUMINAV_APPLY_F32 "(p_ptr:*fp32, g_ptr:*fp32, " LUMINAV_TRITON_APPLY_SIG
#define LUMINAV_APPLY_BF16 "(p_ptr:*i16, g_ptr:*i16, " LUMINAV_TRITON_APPLY_SIG

const AotKernelAbi kTdclmKernelSet[kTdclmKernelCount] = {
    {"luminav_triton_finalize_tensor", LUMINAV_TRITON_FINALIZE_SIG},
    {"luminav_triton_finalize_row", LUMINAV_TRITON_FINALIZE_SIG},
    {"luminav_triton_finalize_factored", LUMINAV_TRITON_FINALIZE_SIG},
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
    {"luminav_triton_row_sums_gf32_4x1024", LUMINAV_ROW_SUMS_SIG("*fp32")},
    {"luminav_triton_row_sums_gf32_256x16", LUMINAV_ROW_SUMS_SIG("*fp32")},
    {"luminav_triton_row_sums_gbf16_4x1024", LUMINAV_ROW_SUMS_SIG("*i16")},
    {"luminav_triton_row_sums_gbf16_256x16", LUMINAV_ROW_SUMS_SIG("*i16")},
    {"luminav_triton_row_sums_gf32_4x1024_a16", LUMINAV_ROW_SUMS_SIG("*fp32")},
    {"luminav_triton_row_sums_gf32_256x16_a16", LUMINAV_ROW_SUMS_SIG("*fp32")},
    {"luminav_triton_row_sums_gbf16_4x1024_a16", LUMINAV_ROW_SUMS_SIG("*i16")},
    {"luminav_triton_row_sums_gbf16_256x16_a16", LUMINAV_ROW_SUMS_SIG("*i16")},
    {"luminav_triton_col_sums_gf32_32x128_chunk256", LUMINAV_COL_SUMS_SIG("*fp32")},
    {"luminav_triton_col_sums_gf32_256x16_chunk256", LUMINAV_COL_SUMS_SIG("*fp32")},
    {"luminav_triton_col_sums_gbf16_32x128_chunk256", LUMINAV_COL_SUMS_SIG("*i16")},
    {"luminav_triton_col_sums_gbf16_256x16_chunk256", LUMINAV_COL_SUMS_SIG("*i16")},
    {"luminav_triton_col_sums_gf32_32x128_chunk256_a16", LUMINAV_COL_SUMS_SIG("*fp32")},
    {"luminav_triton_col_sums_gf32_256x16_chunk256_a16", LUMINAV_COL_SUMS_SIG("*fp32")},
    {"luminav_triton_col_sums_gbf16_32x128_chunk256_a16", LUMINAV_COL_SUMS_SIG("*i16")},
    {"luminav_triton_col_sums_gbf16_256x16_chunk256_a16", LUMINAV_COL_SUMS_SIG("*i16")},
};
#undef LUMINAV_ROW_SUMS_SIG
#undef LUMINAV_COL_SUMS_SIG
#undef LUMINAV_APPLY_F32
#undef LUMINAV_APPLY_BF16

bool check_tdclm_kernel_set(const cuda::KernelManifest& manifest, std::string* why) {
  if (!check_kernel_set(manifest, kTdclmKernelSet, why)) return false;
  // The build records a sums kernel's tile as its elements_per_program: the product of the
  // shape its name gives, which the grids below assume.
  for (const Tile tile : {kRowWide, kRowNarrow, kColWide, kColNarrow}) {
    for (const AotKernelAbi& abi : kTdclmKernelSet) {
      if (abi.name.find("_sums_") == std::string_view::npos) continue;
      if (abi.name.find("_" + tile_name(tile)) == std::string_view::npos) continue;
      const cuda::KernelEntry* k = manifest.find_kernel(abi.name);
      if (k->elements_per_program != static_cast<uint64_t>(tile.rows * tile.cols)) {
        *why = "manifest: kernel " + k->name + " covers " + std::to_string(k->elements_per_program) +
               " elements per program, its name says " + tile_name(tile) + " (kernels from another build?)";
        return false;
      }
    }
  }
  return true;
}

size_t tdclm_partials_bytes(const CudaKernels& kernels, const TdclmTensor& t) {
  if (t.form == TdclmForm::kTensor) return clm_partials_bytes(kernels, t.t.n);
  return static_cast<size_t>(ceil_div(t.rows, row_tile(t).rows)) * kPartialFields * sizeof(double);
}

size_t tdclm_row_sums_bytes(const TdclmTensor& t) {
  return t.form == TdclmForm::kTensor ? 0 : static_cast<size_t>(t.rows) * sizeof(double);
}

size_t tdclm_col_sums_bytes(const TdclmTensor& t) {
  if (t.form != TdclmForm::kFactored) return 0;
  return static_cast<size_t>(ceil_div(t.rows, kChunkRows) * t.cols) * sizeof(double);
}

size_t tdclm_region_bytes(const TdclmTensor& t) {
  const int64_t factors = t.form == TdclmForm::kFactored ? t.rows + 2 * t.cols
                          : t.form == TdclmForm::kRow   ? t.rows
                                                        : 1;
  return static_cast<size_t>(4 + ceil_div(factors, 4) * 4) * sizeof(float);
}

std::string tdclm_row_sums_kernel(const TdclmTensor& t) {
  return std::string("luminav_triton_row_sums_") + gradient(t) + "_" + tile_name(row_tile(t)) +
         (factor_aligned(t) ? "_a16" : "");
}

std::string tdclm_col_sums_kernel(const TdclmTensor& t) {
  return std::string("luminav_triton_col_sums_") + gradient(t) + "_" + tile_name(col_tile(t)) + "_chunk" +
         std::to_string(kChunkRows) + (factor_aligned(t) ? "_a16" : "");
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
  float bound_ratio = 0.0f;
  int64_t num_partials = 0, chunks = 1;
  // What the finalize reads the sums from (the tensor form reads neither: its region stands in).
  uint64_t row_sums = x.factors, col_sums = x.factors;
  if (x.form == TdclmForm::kTensor) {
    if (!launch_grad_sums(kernels, b, x.t, s, stream, &num_partials, why)) return false;
  } else {
    const int64_t grid = ceil_div(x.rows, row_tile(x).rows);
    num_partials = grid;
    void* row_args[] = {&x.t.grad, &sc.row_sums, &v.partials, &v.k, &v.words, &x.rows, &x.cols};
    if (!kernels.launch(tdclm_row_sums_kernel(x), static_cast<unsigned>(grid), 1, row_args, stream, why)) {
      return false;
    }
    row_sums = sc.row_sums;
    if (x.form == TdclmForm::kFactored) {
      chunks = ceil_div(x.rows, kChunkRows);
      void* col_args[] = {&x.t.grad, &sc.col_sums, &v.k, &v.words, &x.rows, &x.cols};
      if (!kernels.launch(tdclm_col_sums_kernel(x), static_cast<unsigned>(ceil_div(x.cols, col_tile(x).cols)),
                          static_cast<unsigned>(chunks), col_args, stream, why)) {
        return false;
      }
      col_sums = sc.col_sums;
    }
  }
  void* finalize_args[] = {&v.partials, &num_partials, &x.gl, &v.words, &v.k, &x.t.exp_avg_sq, &row_sums,
                           &col_sums, &x.factors, &x.t.n, &x.rows, &x.cols, &chunks, &x.t.position, &c.beta2,
                           &c.one_minus_beta2, &bound_ratio};
  return kernels.launch(std::string("luminav_triton_finalize_") + form_name(x.form), 1, 1, finalize_args, stream,
                        why);
}

bool launch_tdclm_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const TdclmTensor& t,
                        const ClmScalars& s, cuda::drv::CUstream stream, std::string* why) {
  return launch_apply_kernel(kernels, tdclm_apply_kernel(t), b, t.t, s, ApplyMoments{t.gl, t.factors, t.rows, t.cols},
                             stream, why);
}

}  // namespace luminav::triton_aot
