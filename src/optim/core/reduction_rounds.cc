// Global values of pass 2 from the all-reduced partial sums of pass 1.
#include "optim/core/reduction_rounds.h"

#include <string>

namespace luminav::core {

Status finalize_round(const StepConstants& k, const luminav_partials& sum,
                      uint64_t logical_num_elements, int round, float s_old,
                      TensorGlobals& globals) {
  if (round_has_grad_sums(round) && logical_num_elements > 0 && k.check_finite && sum.nonfinite_count > 0) {
    return Status::error(LUMINAV_STATUS_NONFINITE_GRAD,
                         "non-finite gradient: " + std::to_string(sum.nonfinite_count) + " of " +
                             std::to_string(logical_num_elements) +
                             " elements are NaN or Inf; nothing was written");
  }
  fold_round_sums(k, sum, logical_num_elements, round, s_old, globals);
  return Status::success();
}

}  // namespace luminav::core
