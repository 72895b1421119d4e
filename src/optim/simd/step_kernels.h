// Entry points of the Highway step kernels (step_kernels.cc), dispatched at run
// time to the best target the CPU supports (HWY_DYNAMIC_DISPATCH).
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/step_constants.h"

namespace luminav::simd {

// What the traversal of a TD-CLM row/factored tensor (core/second_moment_layout.h
// kRow, kFactored) reads of its updated factors (core/factor_update.h).
struct FactorView {
  const float* row = nullptr;           // the tensor's rows: row_r after this step
  const float* col_over_rho = nullptr;  // factored: C floats col_c / rho; row: nullptr
  uint64_t cols = 0;                    // C
};

// Pass 2 over elements [begin, end) of one tensor: moments, update, bound,
// decay and write-back of every buffer but the TD-CLM scalar s or factors,
// which the caller writes once per tensor. `factors` is given for kRow and
// kFactored tensors (else nullptr).
void apply_range(const core::StepConstants& k, const core::TensorGlobals& globals,
                 const luminav_tensor& tensor, const FactorView* factors, size_t begin,
                 size_t end);

// Pass 1, round `round`, over elements [begin, end) of one tensor: the
// fields of luminav_partials that round holds (core/reduction_rounds.h),
// summed in a fixed order (lane-wise, then the lanes in a fixed tree); the
// other fields are zero. Deterministic for a given target and range. The
// row and column sums of kRow/kFactored tensors come from reduce_factor_block;
// here round 0 gives their finite check and sum g^2 only, and the round of
// the update sums needs `factors`.
void reduce_range(const core::StepConstants& k, const core::TensorGlobals& globals,
                  const luminav_tensor& tensor, int round, const FactorView* factors,
                  size_t begin, size_t end, luminav_partials& out);

// Round 0 of a kRow/kFactored tensor over the block rows [row_begin, row_end)
// x columns [col_begin, col_end) (C = `cols`): row_sums[r - row_begin] = the
// sum of g^2 over the block's columns of row r, lanes then a fixed tree;
// col_sums[c - col_begin] (unless nullptr) = the sum over the block's rows of
// column c, in row order. Returns the largest bit pattern of |g| seen (>=
// that of +Inf exactly when an element is NaN or +-Inf).
int32_t reduce_factor_block(const core::StepConstants& k, const luminav_tensor& tensor,
                            uint64_t cols, size_t row_begin, size_t row_end, size_t col_begin,
                            size_t col_end, double* row_sums, double* col_sums);

// The Highway target (HWY_AVX2, ...) the dispatched kernels run on now.
int64_t dispatched_target();

}  // namespace luminav::simd
