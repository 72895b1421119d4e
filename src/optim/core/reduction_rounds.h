// Which reductions a step needs, in which round, and how their global sums
// become the per-tensor values of pass 2 (Note [reduction rounds] in
// dispatch/backend.h).
#pragma once

#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/status.h"
#include "optim/core/step_constants.h"

namespace luminav::core {

// K and the norms are needed (cautious mask or tensor bound).
inline bool needs_update_sums(const StepConstants& k) {
  return k.cautious != 0 || k.bound_mode == LUMINAV_BOUND_TENSOR;
}

// 0, 1 or 2. CLM: one round when anything is reduced (finite check, K,
// norms), else none. TD-CLM: round 0 always (sum g^2 gives s); K and the
// norms need u, hence s, so they take a second round.
inline int reduction_rounds(const StepConstants& k) {
  if (k.tdclm) return needs_update_sums(k) ? 2 : 1;
  return (k.check_finite || needs_update_sums(k)) ? 1 : 0;
}

// Round 0 always carries the nonfinite count and sum g^2.
inline bool round_has_grad_sums(int round) { return round == 0; }

// The round that carries K, sum (lr*u*phi)^2 and sum x^2 (if any).
inline bool round_has_update_sums(const StepConstants& k, int round) {
  return needs_update_sums(k) && round == (k.tdclm ? 1 : 0);
}

// Globals before any round: s unchanged, scales 1.
TensorGlobals initial_globals(const StepConstants& k, float s_old);

// Folds the all-reduced partials of `round` into `globals` (which holds the
// results of the earlier rounds). Round 0 with the finite check on fails with
// NONFINITE_GRAD when any gradient element is NaN or +-Inf. TD-CLM round 0:
// s = beta2*s_old + (1-beta2)*q in fp32, q = fp32(sum g^2 / N); with row sums
// (row_count > 0: factored/row) also R = row_count and rho =
// fp32(row_factor_sum / R). The factor-sum pointers of `globals` are kept. The round of
// the update sums: c = N / max(K, 0.001 N) (cautious, else 1), A = c *
// sqrt(update_sq_sum), B = sqrt(weight_sq_sum), bound scale = ratio*B/A when
// B > 0 and A > ratio*B (tensor bound, else 1). N = 0 leaves the globals as
// they are.
Status finalize_round(const StepConstants& k, const luminav_partials& sum,
                      uint64_t logical_num_elements, int round, float s_old,
                      TensorGlobals& globals);

}  // namespace luminav::core
