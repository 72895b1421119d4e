// The luminav_tensor of the C API's flat entry points (seed API, bf16/f16).
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"

namespace luminav::capi {

// An unsharded tensor (index_offset 0) whose gradient has the param's dtype.
// These entry points take no rows: their TD-CLM is td_factor tensor (the
// scalar s in exp_avg_sq), as the seed's header documents.
inline luminav_tensor single_tensor(void* param, const void* grad, float* exp_avg,
                                    float* exp_avg_sq, float* master, size_t num_elements,
                                    uint64_t seed, int dtype) {
  luminav_tensor tensor{};
  tensor.param = param;
  tensor.grad = grad;
  tensor.exp_avg = exp_avg;
  tensor.exp_avg_sq = exp_avg_sq;
  tensor.master = master;
  tensor.num_elements = num_elements;
  tensor.index_offset = 0;
  tensor.seed = seed;
  tensor.param_dtype = dtype;
  tensor.grad_dtype = dtype;
  tensor.rows = 0;
  tensor.td_factor = LUMINAV_TD_TENSOR;
  return tensor;
}

}  // namespace luminav::capi
