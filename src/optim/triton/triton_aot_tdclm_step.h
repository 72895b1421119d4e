// The launches of TD-CLM's round 0 (the factor sums and factors, or sum g^2 and the
// device finalize) and pass 2 from the Triton AOT kernel set (Note [AOT TD-CLM set] in
// build_triton_aot.py), packed in the order of each kernel's manifest signature;
// the buffers and scalars are the CLM step's (triton_aot_clm_step.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "optim/triton/triton_aot_clm_step.h"

namespace luminav::triton_aot {

// core::SecondMoment's kTensor, kRow, kFactored (triton_kernels.TENSOR, ROW, FACTORED): the KIND
// of the kernels. A TD-CLM tensor with C = 1 steps as CLM (launch_finite_check, launch_apply).
enum class TdclmForm : int { kTensor = 1, kRow = 2, kFactored = 3 };

struct TdclmTensor {
  ClmTensor t;  // exp_avg_sq holds s (tensor), row[R] (row) or row[R] then col[C] (factored)
  TdclmForm form = TdclmForm::kTensor;
  int64_t rows = 1, cols = 1;  // R and C = N / R (row, factored)
  // This tensor's device region between its round 0 and its pass 2: fp32[4] globals (s, -, -,
  // rho) and fp32[R + 2C] new factors (row, col, col/rho); tdclm_region_bytes of them.
  uint64_t gl = 0, factors = 0;
};

// Scratch of the factor sums (Note [Triton factor tiles] in triton_kernels.py), reused by the
// tensors of a step in stream order (each tensor's factor kernels read them before the next
// tensor's sums write them).
struct TdclmScratch {
  uint64_t row_partials = 0;  // fp64[strips * R], each row's sum of g^2 over a strip of columns
  uint64_t col_partials = 0;  // fp64[chunks * C], each column's over a chunk of rows (factored)
};

inline constexpr int kTdclmKernelCount = 23;
extern const AotKernelAbi kTdclmKernelSet[kTdclmKernelCount];

// check_kernel_set for kTdclmKernelSet, and each sums and factor kernel's elements_per_program
// equal to the tile its name and this launcher's grids assume.
bool check_tdclm_kernel_set(const cuda::KernelManifest& manifest, std::string* why);

// `name` in `manifest` covers `want` elements per program (the grids this library computes assume it);
// false with `why` otherwise.
bool check_elements_per_program(const cuda::KernelManifest& manifest, std::string_view name, uint64_t want,
                                std::string* why);
// Every sums, rows and cols kernel of `set` covers the tile its name and the grids assume.
bool check_factor_tiles(const cuda::KernelManifest& manifest, std::span<const AotKernelAbi> set, std::string* why);

// Bytes of b.partials (the tensor form: 5 fp64 per reduce program; row/factored: one fp64 per
// factor_rows program), of the scratch's row and column partials, and of the tensor's region
// (globals and new factors, a multiple of 16 bytes).
size_t tdclm_partials_bytes(const CudaKernels& kernels, const TdclmTensor& t);
size_t tdclm_row_partials_bytes(const TdclmTensor& t);
size_t tdclm_col_partials_bytes(const TdclmTensor& t);
size_t tdclm_region_bytes(const TdclmTensor& t);

// Round 0 of one tensor on the device: its sums, then the finalize (tensor) or the factor kernels
// (row, factored): a non-finite gradient sets the words (smallest failing position wins), else s
// or the new factors and rho go to t.gl and t.factors (nothing of the tensor's own buffers is
// written). False with `why` when a launch fails.
bool launch_tdclm_round0(const CudaKernels& kernels, const ClmStepBuffers& b, const TdclmScratch& scratch,
                         const TdclmTensor& t, const ClmScalars& s, cuda::drv::CUstream stream, std::string* why);
// Pass 2 of one tensor from t.gl and t.factors; its program 0 stores s or the new factors into
// exp_avg_sq. Writes nothing when the words hold a failure.
bool launch_tdclm_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const TdclmTensor& t,
                        const ClmScalars& s, cuda::drv::CUstream stream, std::string* why);

// The tiles of t's factor kernels (Note [Triton factor tiles]): the sums' columns per program and
// its name ("128x128"), the column strips and row chunks the sums cover, and the programs of
// factor_rows and factor_cols (factored).
int64_t tile_cols(const TdclmTensor& t);
std::string sums_tile_name(const TdclmTensor& t);
int64_t strips(const TdclmTensor& t);
int64_t chunks(const TdclmTensor& t);
int64_t row_blocks(const TdclmTensor& t);
int64_t col_blocks(const TdclmTensor& t);

// The names the launches above take for `t` (and its scratch: the sums' _a16 kernels hint the partials too).
std::string tdclm_sums_kernel(const TdclmTensor& t, const TdclmScratch& scratch);
std::string tdclm_apply_kernel(const TdclmTensor& t);

}  // namespace luminav::triton_aot
