// Entry points of the Highway step kernels (step_kernels.cc), dispatched at run
// time to the best target the CPU supports (HWY_DYNAMIC_DISPATCH).
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/step_constants.h"

namespace luminav::simd {

// Pass 2 over elements [begin, end) of one tensor: moments, update, bound,
// decay and write-back of every buffer (not the TD-CLM scalar s, which the
// caller writes once per tensor).
void apply_range(const core::StepConstants& k, const core::TensorGlobals& globals,
                 const luminav_tensor& tensor, size_t begin, size_t end);

// Pass 1, round `round`, over elements [begin, end) of one tensor: the
// fields of luminav_partials that round holds (core/reduction_rounds.h),
// summed in a fixed order (lane-wise, then the lanes in a fixed tree); the
// other fields are zero. Deterministic for a given target and range.
void reduce_range(const core::StepConstants& k, const core::TensorGlobals& globals,
                  const luminav_tensor& tensor, int round, size_t begin, size_t end,
                  luminav_partials& out);

// The Highway target (HWY_AVX2, ...) the dispatched kernels run on now.
int64_t dispatched_target();

}  // namespace luminav::simd
