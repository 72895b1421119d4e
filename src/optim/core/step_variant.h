// The step's options as compile-time constants where they take their common
// values, so that traversals compile a branch-free loop for the common step.
#pragma once

#include "optim/core/host_device.h"
#include "optim/core/step_constants.h"

namespace luminav::core {

// Note [plain steps]: a step without lam, soft clip, cautious mask, bound or
// gradient scale
// (AdamW's CLM, and TD-CLM) is the one nearly every caller runs. PlainStep
// shadows those options of StepConstants with static constexpr members of
// the same names, so the element math (update_math.h), templated on its
// constants type, compiles them out: the loop body is straight-line code with
// constants in registers. (The general loop kept every option's branch and
// reloaded constants from the stack each vector. At N = 2^26 the apply pass
// is memory-bound either way, so the gain there is within the machine's
// noise; where the data is in cache it shows: N = 2^18, one thread, CLM fp32
// without the finite check 0.169 against 0.223 ms, and with it (its pass 1
// was made cheaper at the same time) 0.192 against 0.264 ms;
// bench/optim_simd_pass_split.py --log2-n 18 --threads 1, docs/benchmarks-history.md.)
template <int kTdclm>
struct PlainStep : StepConstants {
  static constexpr int tdclm = kTdclm;
  static constexpr float lam = 0.0f;
  static constexpr float tau = 0.0f;
  static constexpr int cautious = 0;
  static constexpr int bound_mode = 0;
  static constexpr float inv_grad_scale = 1.0f;
  LUMINAV_HD explicit PlainStep(const StepConstants& k) : StepConstants(k) {}
};

LUMINAV_HD bool is_plain_step(const StepConstants& k) {
  return k.lam == 0.0f && k.tau == 0.0f && k.cautious == 0 && k.bound_mode == 0 &&
         k.inv_grad_scale == 1.0f;
}

// StepConstants whose gradient scale is a compile-time 1: a traversal that
// is not a PlainStep (pass 1 reads only the step's constants) can still drop
// the scale's branch from its loop (the bare finite check of CLM's pass 1
// is a load, an AND and a max per vector: a branch there shows).
struct UnscaledStep : StepConstants {
  static constexpr float inv_grad_scale = 1.0f;
  LUMINAV_HD explicit UnscaledStep(const StepConstants& k) : StepConstants(k) {}
};

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
