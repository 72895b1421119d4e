// Global values of pass 2 from the all-reduced partial sums of pass 1.
#include "optim/core/reduction_rounds.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace luminav::core {

TensorGlobals initial_globals(const StepConstants& k, float s_old) {
  TensorGlobals g;
  g.second_moment = k.tdclm ? s_old : 0.0f;
  g.cautious_scale = 1.0f;
  g.bound_scale = 1.0f;
  return g;
}

Status finalize_round(const StepConstants& k, const luminav_partials& sum,
                      uint64_t logical_num_elements, int round, float s_old,
                      TensorGlobals& globals) {
  if (round == 0) globals = initial_globals(k, s_old);
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
      const float q = static_cast<float>(sum.grad_sq_sum / n);
      globals.second_moment = k.beta2 * s_old + k.one_minus_beta2 * q;
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
