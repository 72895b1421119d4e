// Which reductions a step needs, in which round, and how their global sums
// become the per-tensor values of pass 2 (Note [reduction rounds] in
// dispatch/backend.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/host_device.h"
#include "optim/core/status.h"
#include "optim/core/step_constants.h"
#include "optim/core/update_math.h"

namespace luminav::core {

// K and the norms are needed (cautious mask, tensor bound or RMS clip).
LUMINAV_HD bool needs_update_sums(const StepConstants& k) {
  return k.cautious != 0 || scales_whole_step(k.bound_mode);
}

// 0, 1 or 2. CLM: one round when anything is reduced (finite check, K,
// norms), else none. TD-CLM: round 0 always (sum g^2 gives s); K and the
// norms need u, hence s, so they take a second round.
LUMINAV_HD int reduction_rounds(const StepConstants& k) {
  if (k.tdclm) return needs_update_sums(k) ? 2 : 1;
  return (k.check_finite || needs_update_sums(k)) ? 1 : 0;
}

// Round 0 always carries the nonfinite count and sum g^2.
LUMINAV_HD bool round_has_grad_sums(int round) { return round == 0; }

// The round that carries K, sum (lr*u*phi)^2 and sum x^2 (if any).
LUMINAV_HD bool round_has_update_sums(const StepConstants& k, int round) {
  return needs_update_sums(k) && round == (k.tdclm ? 1 : 0);
}

// Whether the round of the update sums needs sum x^2: only the tensor bound's
// B = ||x|| does (the cautious mask and the RMS clip do not read x there).
LUMINAV_HD bool update_sums_need_weights(const StepConstants& k) { return k.bound_mode == LUMINAV_BOUND_TENSOR; }

// Globals before any round: s unchanged, scales 1.
LUMINAV_HD TensorGlobals initial_globals(const StepConstants& k, float s_old) {
  TensorGlobals g;
  g.second_moment = k.tdclm ? s_old : 0.0f;
  g.cautious_scale = 1.0f;
  g.bound_scale = 1.0f;
  return g;
}

// The arithmetic of finalize_round without its finite check, for the host
// and for a device that finalizes its own partials (spec "Asynchronous
// devices"): round 0 resets `globals` (keeping its factor-sum pointers) and
// folds sum g^2 into TD-CLM's s (and, with row sums, R and rho); the round of
// the update sums gives the cautious and bound scales.
LUMINAV_HD void fold_round_sums(const StepConstants& k, const luminav_partials& sum,
                                uint64_t logical_num_elements, int round, float s_old,
                                TensorGlobals& globals) {
  if (round == 0) {
    TensorGlobals fresh = initial_globals(k, s_old);
    fresh.row_sq_sums = globals.row_sq_sums;
    fresh.col_sq_sums = globals.col_sq_sums;
    globals = fresh;
  }
  if (logical_num_elements == 0) return;
  const double n = static_cast<double>(logical_num_elements);
  if (round_has_grad_sums(round) && k.tdclm) {
    globals.second_moment = factor_ema(k, s_old, factor_mean(sum.grad_sq_sum, n));
    if (sum.row_count > 0) {  // factored/row: rho and R of the logical tensor
      globals.logical_rows = sum.row_count;
      globals.row_factor_mean = factor_mean(sum.row_factor_sum, static_cast<double>(sum.row_count));
    }
  }
  if (round_has_update_sums(k, round)) {
    double c = 1.0;
    if (k.cautious) {
      const double agree = static_cast<double>(sum.agree_count);
      c = n / (agree > 0.001 * n ? agree : 0.001 * n);
      globals.cautious_scale = static_cast<float>(c);
    }
    if (scales_whole_step(k.bound_mode)) {
      // A = ||d||_2; B = ||x||_2 (tensor bound) or lr * sqrt(N) (RMS clip:
      // A > ratio*B is RMS(u) > ratio, as d = lr * u).
      const double a = c * ::sqrt(sum.update_sq_sum);
      const double b = update_sums_need_weights(k) ? ::sqrt(sum.weight_sq_sum)
                                                   : static_cast<double>(k.lr) * ::sqrt(n);
      const double limit = static_cast<double>(k.bound_ratio) * b;
      globals.bound_scale = (b > 0.0 && a > limit) ? static_cast<float>(limit / a) : 1.0f;
    }
  }
}

// Folds the all-reduced partials of `round` into `globals` (which holds the
// results of the earlier rounds). Round 0 with the finite check on fails with
// NONFINITE_GRAD when any gradient element is NaN or +-Inf. TD-CLM round 0:
// s = beta2*s_old + (1-beta2)*q in fp32, q = fp32(sum g^2 / N); with row sums
// (row_count > 0: factored/row) also R = row_count and rho =
// fp32(row_factor_sum / R). The factor-sum pointers of `globals` are kept. The round of
// the update sums: c = N / max(K, 0.001 N) (cautious, else 1), A = c *
// sqrt(update_sq_sum), B = sqrt(weight_sq_sum) (tensor bound) or lr * sqrt(N)
// (RMS clip), bound scale = ratio*B/A when B > 0 and A > ratio*B (else 1).
// N = 0 leaves the globals as they are.
Status finalize_round(const StepConstants& k, const luminav_partials& sum,
                      uint64_t logical_num_elements, int round, float s_old,
                      TensorGlobals& globals);

}  // namespace luminav::core
