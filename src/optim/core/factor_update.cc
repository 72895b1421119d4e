// The TD-CLM row and column factor updates, once for every CPU backend.
#include "optim/core/factor_update.h"

#include <algorithm>

#include "optim/core/update_math.h"

namespace luminav::core {

float updated_row_factor(const StepConstants& k, const MomentLayout& layout,
                         const float* exp_avg_sq, const double* row_sq_sums, size_t r) {
  return factor_ema(k, exp_avg_sq[r], factor_mean(row_sq_sums[r], static_cast<double>(layout.cols)));
}

double row_factor_sum(const StepConstants& k, const MomentLayout& layout, const float* exp_avg_sq,
                      const double* row_sq_sums) {
  double sum = 0.0;
  for (size_t r = 0; r < layout.rows; ++r) {
    sum += updated_row_factor(k, layout, exp_avg_sq, row_sq_sums, r);
  }
  return sum;
}

void update_factors(const StepConstants& k, const MomentLayout& layout, const float* exp_avg_sq,
                    const TensorGlobals& globals, UpdatedFactors& out) {
  out.row.resize(layout.rows);
  for (size_t r = 0; r < layout.rows; ++r) {
    out.row[r] = updated_row_factor(k, layout, exp_avg_sq, globals.row_sq_sums, r);
  }
  if (layout.kind != SecondMoment::kFactored) {
    out.col.clear();
    out.col_over_rho.clear();
    return;
  }
  out.col.resize(layout.cols);
  out.col_over_rho.resize(layout.cols);
  const float* col_old = exp_avg_sq + layout.rows;
  const double logical_rows = static_cast<double>(globals.logical_rows);
  for (size_t c = 0; c < layout.cols; ++c) {
    out.col[c] = factor_ema(k, col_old[c], factor_mean(globals.col_sq_sums[c], logical_rows));
    out.col_over_rho[c] = column_over_rho(out.col[c], globals.row_factor_mean);
  }
}

void store_factors(const MomentLayout& layout, const UpdatedFactors& factors, float* exp_avg_sq) {
  std::copy(factors.row.begin(), factors.row.end(), exp_avg_sq);
  if (layout.kind == SecondMoment::kFactored) {
    std::copy(factors.col.begin(), factors.col.end(), exp_avg_sq + layout.rows);
  }
}

}  // namespace luminav::core
