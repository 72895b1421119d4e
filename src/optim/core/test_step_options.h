// Test-only: the options of one LuminaV step as the backend test suites vary
// them, and the C struct they become (shared by the scalar and simd suites).
#pragma once

#include <cstdint>

#include "luminav/luminav.h"

namespace luminav::testing {

struct StepOptions {
  int mode = LUMINAV_MODE_CLM;
  double tau = 0.0, lam = 0.0;
  int cautious = 0, bound_mode = LUMINAV_BOUND_NONE;
  double bound_ratio = 0.0;
  int param_dtype = LUMINAV_DTYPE_F32, grad_dtype = LUMINAV_DTYPE_F32;
  bool master = false;
  int stochastic_rounding = 1;
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.05;
  uint64_t step = 3;
};

inline luminav_hyperparams hyperparams(const StepOptions& o) {
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.lr = o.lr;
  hp.beta1 = o.beta1;
  hp.beta2 = o.beta2;
  hp.eps = o.eps;
  hp.weight_decay = o.wd;
  hp.tau = o.tau;
  hp.lam = o.lam;
  hp.buffer_mode = o.mode;
  hp.cautious = o.cautious;
  hp.bound_mode = o.bound_mode;
  hp.bound_ratio = o.bound_ratio;
  hp.stochastic_rounding = o.stochastic_rounding;
  hp.step = o.step;
  return hp;
}

}  // namespace luminav::testing
