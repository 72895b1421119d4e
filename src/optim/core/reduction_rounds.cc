// Global values of pass 2 from the all-reduced partial sums of pass 1.
#include "optim/core/reduction_rounds.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "optim/core/update_math.h"

namespace luminav::core {

TensorGlobals initial_globals(const StepConstants& k, float s_old) {
  TensorGlobals g;
  g.second_moment = k.tdclm ? s_old : 0.0f;
  g.cautious_scale = 1.0f;
  g.bound_scale = 1.0f;
  return g;
}

namespace {

// Round 0 starts from initial_globals but keeps the factor-sum arrays.
void reset_values(const StepConstants& k, float s_old, TensorGlobals& globals) {
  TensorGlobals fresh = initial_globals(k, s_old);
  fresh.row_sq_sums = globals.row_sq_sums;
  fresh.col_sq_sums = globals.col_sq_sums;
  globals = fresh;
}

}  // namespace

Status finalize_round(const StepConstants& k, const luminav_partials& sum,
                      uint64_t logical_num_elements, int round, float s_old,
                      TensorGlobals& globals) {
  if (round == 0) reset_values(k, s_old, globals);
  if (logical_num_elements == 0) return Status::success();
  const double n = static_cast<double>(logical_num_elements);

  if (round_has_grad_sums(round)) {
    if (k.check_finite && sum.nonfinite_count > 0) {
      return Status::error(LUMINAV_STATUS_NONFINITE_GRAD,
                           "non-finite gradient: " + std::to_string(sum.nonfinite_count) +
                               " of " + std::to_string(logical_num_elements) +
                               " elements are NaN or Inf; nothing was written");
    }
    if (k.tdclm) {
      globals.second_moment = factor_ema(k, s_old, factor_mean(sum.grad_sq_sum, n));
      if (sum.row_count > 0) {  // factored/row: rho and R of the logical tensor
        globals.logical_rows = sum.row_count;
        globals.row_factor_mean =
            factor_mean(sum.row_factor_sum, static_cast<double>(sum.row_count));
      }
    }
  }

  if (round_has_update_sums(k, round)) {
    double c = 1.0;
    if (k.cautious) {
      c = n / std::max(static_cast<double>(sum.agree_count), 0.001 * n);
      globals.cautious_scale = static_cast<float>(c);
    }
    if (k.bound_mode == LUMINAV_BOUND_TENSOR) {
      const double a = c * std::sqrt(sum.update_sq_sum);
      const double b = std::sqrt(sum.weight_sq_sum);
      const double limit = static_cast<double>(k.bound_ratio) * b;
      globals.bound_scale = (b > 0.0 && a > limit) ? static_cast<float>(limit / a) : 1.0f;
    }
  }
  return Status::success();
}

}  // namespace luminav::core
