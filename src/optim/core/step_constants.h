// The per-step, per-tensor fp32 constants every backend's element math reads.
#pragma once

#include <cmath>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/host_device.h"

namespace luminav::core {

// Derived once per step from the caller's hyperparameters (see
// make_step_constants in step_constants.cc). All fp32 as the spec demands,
// except the bias corrections, which are evaluated in double and rounded.
struct StepConstants {
  float lr;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float decay_factor;      // 1 - lr * weight_decay (fp32)
  // Reciprocals of the bias corrections (Note [bias-correction reciprocals]):
  float inv_bias_correction1;  // fp32(1 / (1 - beta1^t)), in double before rounding
  float inv_bias_correction2;  // fp32(1 / (1 - beta2^t))
  float lam, one_minus_lam;
  float tau;               // 0: no soft clip
  float bound_ratio;
  // fp32(1 / sigma), the reciprocal formed in double (spec "Gradient scale"):
  // every gradient load is g * inv_grad_scale, skipped when it is exactly 1.
  float inv_grad_scale;
  // 1: TD-CLM. Decides the reduction rounds; in the element math (update_math.h
  // moments_and_update) 1 means the tensor scalar s stands in for v. A CPU
  // traversal clears it for a TD-CLM tensor whose second moment is per
  // element (C = 1; core/second_moment_layout.h, element_constants).
  int tdclm;
  int cautious;
  int bound_mode;          // LUMINAV_BOUND_*: 0 none, 1 tensor, 2 element, 3 rms
  int check_finite;        // 1: a non-finite gradient fails the step
  // 1: round 0 sums g^2 (TD-CLM needs it; luminav_reduce reports it). A whole
  // CLM step sets 0: its round 0 is only the finite check, and a backend may
  // then leave grad_sq_sum at 0 (the simd backend's pass 1 reads the gradient
  // a quarter faster without the double-precision sum).
  int grad_sq_wanted;
  // Write-back of 16-bit parameters.
  int stochastic_rounding; // 1: spec's SR keyed on (seed, step, index), 0: RNE
  uint64_t step;           // t >= 1
};

// A bound that scales the whole tensor's step by one factor (bound_scale): the
// tensor bound, or the RMS clip (an extension beyond the spec). The
// element-wise bound clamps each element.
LUMINAV_HD bool scales_whole_step(int bound_mode) {
  return bound_mode == LUMINAV_BOUND_TENSOR || bound_mode == LUMINAV_BOUND_RMS;
}

// Known once the reductions of pass 1 are all-reduced.
struct TensorGlobals {
  float second_moment = 0.0f;  // TD-CLM tensor: s after this step
  float cautious_scale = 1.0f; // N / max(K, 0.001 N)
  float bound_scale = 1.0f;    // tensor bound or RMS clip factor
  float row_factor_mean = 0.0f;  // TD-CLM factored: rho (mean of the updated row factor)
  uint64_t logical_rows = 0;     // TD-CLM factored/row: R of the logical tensor
  // TD-CLM factored/row (luminav_factor_sums): pass 1 round 0 writes the sums
  // of g^2 of each row of this tensor (shard) and of each column (all-reduced
  // before later rounds and the apply pass read them). Null otherwise.
  double* row_sq_sums = nullptr;
  double* col_sq_sums = nullptr;
};

// Validated hyperparameters in, fp32 constants out (spec: bias corrections
// in double from the betas as given, then rounded to fp32).
StepConstants make_step_constants(const luminav_hyperparams& hp);

// The constants that depend on the step count and the learning rate, from
// the caller's double-precision values (Note [derived constants] and Note
// [bias-correction reciprocals] in step_constants.cc). Shared by the host
// and by a device that reads t and lr from its own memory (spec
// "Asynchronous devices"), so both form them the same way.
LUMINAV_HD void set_step_and_lr(StepConstants& k, double beta1, double beta2, double lr,
                                double weight_decay, uint64_t step) {
  const double t = static_cast<double>(step);
  k.step = step;
  k.lr = static_cast<float>(lr);
  k.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  k.inv_bias_correction1 = static_cast<float>(1.0 / (1.0 - ::pow(beta1, t)));
  k.inv_bias_correction2 = static_cast<float>(1.0 / (1.0 - ::pow(beta2, t)));
}

// fp32(1 / sigma), the reciprocal formed in double (spec "Gradient scale").
LUMINAV_HD float inverse_grad_scale(double sigma) { return static_cast<float>(1.0 / sigma); }

}  // namespace luminav::core
