// The step's options as compile-time constants where they take their common
// values, so that traversals compile a branch-free loop for the common step.
#pragma once

#include "optim/core/host_device.h"
#include "optim/core/step_constants.h"

namespace luminav::core {

// Note [plain steps]: a step without lam, soft clip, cautious mask or bound
// (AdamW's CLM, and TD-CLM) is the one nearly every caller runs. PlainStep
// shadows those options of StepConstants with static constexpr members of
// the same names, so the element math (update_math.h), templated on its
// constants type, compiles them out: the loop body is straight-line code with
// constants in registers. At N = 2^26 on one core the general loop, with its
// per-vector option branches and constants reloaded from the stack, ran the
// apply pass at about 80% of torch's fused AdamW per core; the plain loop
// issues fewer instructions per vector, so more of the core's window holds
// memory loads in flight.
template <int kTdclm>
struct PlainStep : StepConstants {
  static constexpr int tdclm = kTdclm;
  static constexpr float lam = 0.0f;
  static constexpr float tau = 0.0f;
  static constexpr int cautious = 0;
  static constexpr int bound_mode = 0;
  LUMINAV_HD explicit PlainStep(const StepConstants& k) : StepConstants(k) {}
};

LUMINAV_HD bool is_plain_step(const StepConstants& k) {
  return k.lam == 0.0f && k.tau == 0.0f && k.cautious == 0 && k.bound_mode == 0;
}

// Calls f(constants) with PlainStep<0|1> for a plain step, else with `k`.
template <class F>
inline void with_step_variant(const StepConstants& k, F&& f) {
  if (!is_plain_step(k)) {
    f(k);
  } else if (k.tdclm) {
    f(PlainStep<1>(k));
  } else {
    f(PlainStep<0>(k));
  }
}

}  // namespace luminav::core
