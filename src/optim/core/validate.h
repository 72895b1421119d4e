// Validation of a step's hyperparameters, tensors and workspace (the spec's
// error table), done once before any backend runs.
#pragma once

#include <cstddef>
#include <span>

#include "luminav/luminav.h"
#include "optim/core/status.h"

namespace luminav::core {

// Every hyperparameter: finite, in range, known modes. The message names the
// parameter and the value it got, e.g. "lr must be >= 0 (got -0.1)".
Status validate_hyperparams(const luminav_hyperparams* hp);

// The tensors of one call: known dtypes, buffers the mode needs present and
// aligned, sizes that do not overflow, and no two byte ranges overlapping,
// within a tensor or across the tensors of a multi-tensor call (in TD-CLM
// exp_avg_sq holds exp_avg_sq_length floats), TD-CLM rows dividing N and
// shards of whole rows. Tensors with N = 0 are only checked for dtypes and
// td_factor.
// `scratch` (may be null) joins the overlap check and must hold
// `scratch_bytes` >= the size luminav_scratch_bytes gives for the tensors.
Status validate_tensors(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                        const void* scratch, size_t scratch_bytes);

// Scratch bytes a call over `tensors` needs (sum of the per-tensor sizes).
size_t scratch_bytes_for_tensors(std::span<const luminav_tensor> tensors);

}  // namespace luminav::core

namespace luminav::core {

// The groups of one luminav_step_groups call: each group's hyperparameters
// and tensors as above (messages prefixed "groups[g]."), and no buffer of one
// group overlapping a buffer of another.
Status validate_groups(std::span<const luminav_group> groups);

}  // namespace luminav::core
