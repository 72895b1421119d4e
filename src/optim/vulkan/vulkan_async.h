// The asynchronous whole step on the Vulkan device (spec "Asynchronous
// devices"): pass 1, the finalize and pass 2 of every tensor recorded in one
// submission that signals a fence and is not waited for; the verdict and the
// scales are formed on the device (lv_finalize.comp), and pass 2 runs only
// when the verdict allows (its dispatches are indirect, their group counts
// zeroed otherwise). Note [Vulkan asynchronous step] in vulkan_async.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "luminav/luminav.h"
#include "optim/vulkan/vulkan_context.h"
#include "optim/vulkan/vulkan_passes.h"

namespace luminav::vulkan {

// One tensor of an asynchronous step: its job (constants as the host knows
// them, cautious and bound scales 1: the device forms them), its position in
// the call (from 0) and whether its group checks the gradient.
struct AsyncTensor {
  TensorJob job;
  uint32_t position = 0;
  bool check_finite = false;
  bool needs_reduce = false;  // the group has a reduction round (finite check, K, norms)
  uint32_t group = 0;         // index into AsyncWords::counters
  // TD-CLM tensor/row/factored: exp_avg_sq (the second moment, formed on
  // the device from it and written back only when the step applies).
  float* factors = nullptr;
};

// The caller's words that the step reads and writes when it runs (Note
// [device step counter] in vulkan_async.cc): each group's step counter (fp32
// t - 1, or null), GradScaler's found_inf (or null), and the constants of
// tensor j at step t as the host forms them (for a tensor with a counter).
struct AsyncWords {
  std::span<float* const> counters;
  float* found_inf = nullptr;
  std::function<StepParams(size_t tensor, uint64_t step)> params_at_step;
};

// The memory allocations a step of `tensors` holds until it completes, at
// most: each chunk of each array one import or staging buffer, each TD-CLM
// tensor's second moment one, the arena's two buffers.
size_t async_step_allocations(const Context& c, std::span<const AsyncTensor> tensors);
// The allocations the steps in flight may hold together: half the device's
// maxMemoryAllocationCount (the rest is left to the synchronous passes and
// the caller). A call needing more runs synchronously; steps in flight are
// waited for, oldest first, until the next one fits.
size_t async_allocation_budget(const Context& c);

// Enqueues one step of any number of tensors (within the budget above);
// returns once it is submitted. Before that it completes
// the steps that have finished; when one of them found a non-finite gradient
// (without skip_nonfinite) that was not yet reported, it waits for the rest,
// clears the failure and returns LUMINAV_STATUS_NONFINITE_GRAD with `why`
// naming the tensor by its position in the call, enqueueing nothing.
// `caller_status` (host memory, may be null) receives a copy of the device
// status word when the step is seen complete. Takes the context's pass mutex.
int enqueue_async_step(Context& c, std::span<AsyncTensor> tensors, const AsyncWords& words, bool skip_nonfinite,
                       luminav_step_status* caller_status, std::string* why);

// Completes the finished steps, or all of them when `wait` (staged arrays
// copied back, caller status words filled, every buffer freed). The caller
// holds the pass mutex.
int complete_async_steps(Context& c, bool wait, std::string* why);

// Waits for every step, then reports a failure not yet reported (as
// enqueue_async_step does) and clears it.
int synchronize_async_steps(Context& c, std::string* why);

// Steps submitted and not yet completed (tests).
size_t async_steps_in_flight();
// Whether this process ever enqueued a step (synchronize is free otherwise).
bool async_steps_used();

}  // namespace luminav::vulkan
