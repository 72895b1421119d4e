// TD-CLM factored/row on the host: the updated row and column factors of
// one tensor (shard) from its old ones and pass 1's sums (spec "TD-CLM second
// moment"), shared by the CPU backends.
#pragma once

#include <cstddef>
#include <vector>

#include "optim/core/second_moment_layout.h"
#include "optim/core/step_constants.h"

namespace luminav::core {

// The updated factors and what the element math reads of them.
struct UpdatedFactors {
  std::vector<float> row;           // rows: row_r after this step
  std::vector<float> col;           // C (factored): col_c after this step
  std::vector<float> col_over_rho;  // C (factored): col_c / rho
};

// row_r = beta2*row_old_r + (1-beta2)*fp32(row_sq_r / C) for the rows of
// `exp_avg_sq` (whose first `layout.rows` floats are the row factor).
float updated_row_factor(const StepConstants& k, const MomentLayout& layout,
                         const float* exp_avg_sq, const double* row_sq_sums, size_t r);

// Sum over the rows of the updated row factor, in double, in row order
// (luminav_partials.row_factor_sum: deterministic for any thread count).
double row_factor_sum(const StepConstants& k, const MomentLayout& layout, const float* exp_avg_sq,
                      const double* row_sq_sums);

// Every updated factor of a kRow / kFactored tensor; the column factor uses
// the all-reduced column sums, R = globals.logical_rows and rho =
// globals.row_factor_mean.
void update_factors(const StepConstants& k, const MomentLayout& layout, const float* exp_avg_sq,
                    const TensorGlobals& globals, UpdatedFactors& out);

// Writes the updated factors into exp_avg_sq (row, then col), after every
// element has been stepped.
void store_factors(const MomentLayout& layout, const UpdatedFactors& factors, float* exp_avg_sq);

}  // namespace luminav::core
