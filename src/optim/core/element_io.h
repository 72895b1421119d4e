// Loading parameters/gradients of any dtype as fp32 and writing parameters
// back in their dtype (RNE or the spec's stochastic rounding).
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/half_convert.h"
#include "optim/core/host_device.h"
#include "optim/core/step_constants.h"
#include "optim/core/stochastic_hash.h"

namespace luminav::core {

// Dtype is a template argument so that traversals branch once per tensor.
template <int Dtype>
LUMINAV_HD float load_as_f32(const void* base, size_t i) {
  if constexpr (Dtype == LUMINAV_DTYPE_F32) {
    return static_cast<const float*>(base)[i];
  } else if constexpr (Dtype == LUMINAV_DTYPE_BF16) {
    return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  } else {
    return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
  }
}

// `logical_index` is the element's index in the unsharded tensor
// (index_offset + i): the stochastic rounding bits depend on it, on the
// tensor's seed and on the step only.
template <int Dtype>
LUMINAV_HD void store_param(void* base, size_t i, float x, const StepConstants& k, uint64_t seed,
                            uint64_t logical_index) {
  if constexpr (Dtype == LUMINAV_DTYPE_F32) {
    static_cast<float*>(base)[i] = x;
  } else if constexpr (Dtype == LUMINAV_DTYPE_BF16) {
    static_cast<uint16_t*>(base)[i] =
        k.stochastic_rounding ? f32_to_bf16_stochastic(x, rounding_bits(seed, k.step, logical_index))
                              : f32_to_bf16_rne(x);
  } else {
    static_cast<uint16_t*>(base)[i] =
        k.stochastic_rounding ? f32_to_f16_stochastic(x, rounding_bits(seed, k.step, logical_index))
                              : f32_to_f16_rne(x);
  }
}

}  // namespace luminav::core
