// Builds the fp32 step constants from the caller's hyperparameters.
#include "optim/core/step_constants.h"

#include <cmath>

#include "luminav/luminav.h"

namespace luminav::core {

StepConstants make_step_constants(const luminav_hyperparams& hp) {
  StepConstants k{};
  k.beta1 = static_cast<float>(hp.beta1);
  k.beta2 = static_cast<float>(hp.beta2);
  // Note [derived constants]: per-tensor constants such as 1 - beta and
  // 1 - lr*wd are formed in double from the caller's values and rounded once
  // to fp32 (as torch does with its Python-float hyperparameters); the
  // per-element arithmetic that uses them is fp32.
  k.one_minus_beta1 = static_cast<float>(1.0 - hp.beta1);
  k.one_minus_beta2 = static_cast<float>(1.0 - hp.beta2);
  k.eps = static_cast<float>(hp.eps);
  // Bias corrections in double from the betas at the caller's precision.
  // Note [bias-correction reciprocals]: the element math multiplies by their
  // reciprocals (formed in double, rounded once) instead of dividing: an fp32
  // divide or square root costs 10-20 cycles per AVX-512 vector on one
  // shared unit, and with three divides and a root per element the apply
  // pass was bound by that unit, not by memory (profiled at N = 2^26). The
  // product and the quotient are each within about 1 ulp of the exact value, far inside the
  // spec's 1e-6 forward-error contract; one divide and one root remain.
  set_step_and_lr(k, hp.beta1, hp.beta2, hp.lr, hp.weight_decay, hp.step);
  k.lam = static_cast<float>(hp.lam);
  k.one_minus_lam = static_cast<float>(1.0 - hp.lam);
  k.tau = static_cast<float>(hp.tau);
  k.bound_ratio = static_cast<float>(hp.bound_ratio);
  k.inv_grad_scale = inverse_grad_scale(hp.grad_scale);
  k.tdclm = hp.buffer_mode == LUMINAV_MODE_TDCLM ? 1 : 0;
  k.cautious = hp.cautious ? 1 : 0;
  k.bound_mode = hp.bound_mode;
  k.check_finite = hp.check_finite ? 1 : 0;
  k.grad_sq_wanted = 1;
  k.stochastic_rounding = hp.stochastic_rounding ? 1 : 0;
  return k;
}

}  // namespace luminav::core
