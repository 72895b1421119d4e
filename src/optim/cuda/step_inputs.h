// The bytes an asynchronous step's launches are made from (Note [a step
// seen before] in step_graph_cache.h).
#pragma once

#include <span>
#include <vector>

#include "luminav/luminav_groups.h"
#include "optim/dispatch/backend.h"

namespace luminav::cuda {

// Every value step_async reads to record its launches: each group's
// constants, tensors, positions and device scalars, the status and scaler
// pointers, the workspace and the device. Written field by field, so that
// padding bytes never count: two calls whose bytes are equal record the same
// launches.
void step_inputs(std::span<const AsyncGroup> groups, const luminav_async& async, const ExecContext& ctx,
                 std::vector<unsigned char>* out);

}  // namespace luminav::cuda
