// The step driver: validate once, choose a backend, run the reduction
// rounds, finalize the per-tensor globals, apply. The C API calls these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "luminav/luminav.h"
#include "optim/core/status.h"
#include "optim/core/step_constants.h"
#include "optim/dispatch/backend.h"

namespace luminav::dispatch {

// luminav_step / luminav_step_multi: all tensors' reductions (and the finite
// check) complete before any tensor is written.
core::Status run_step(const luminav_hyperparams* hp, const luminav_tensor* tensors, size_t count,
                      const luminav_options* options);

// luminav_step_groups: every group's finite check before any write; device
// backends run it asynchronously (luminav_groups.h).
// `enqueue` (luminav_step_groups_enqueue): a host-memory backend that runs
// on an accelerator (vulkan) may return before the step ran.
core::Status run_step_groups(const luminav_group* groups, size_t count, const luminav_options* options,
                             const luminav_async* async, bool enqueue = false);
// luminav_synchronize: waits for the steps the backend of `options` has in
// flight; a failure they found and no call reported yet is the status.
core::Status run_synchronize(const luminav_options* options);
size_t groups_workspace_bytes(const luminav_group* groups, size_t count);

// The sharded split (luminav.h, "pass-1 / pass-2 split").
core::Status run_reduction_rounds(const luminav_hyperparams* hp, int* rounds);
core::Status run_reduce(const luminav_hyperparams* hp, const luminav_tensor* shard, int round,
                        const luminav_globals* globals, const luminav_factor_sums* factor_sums,
                        luminav_partials* out, const luminav_options* options);
core::Status run_finalize(const luminav_hyperparams* hp, const luminav_partials* global_sum,
                          uint64_t logical_num_elements, int round, float s_old,
                          luminav_globals* inout);
core::Status run_apply(const luminav_hyperparams* hp, const luminav_tensor* shard,
                       const luminav_globals* globals, const luminav_factor_sums* factor_sums,
                       const luminav_options* options);

// luminav_step_groups_sharded and its sizes (sharded_step.cc).
core::Status run_step_groups_sharded(const luminav_group* groups, size_t count, const luminav_shard_layout* shards,
                                     const luminav_options* options, const luminav_async* async, int phase,
                                     double* exchange);
int sharded_exchanges(const luminav_group* groups, size_t count);
size_t sharded_exchange_doubles(const luminav_group* groups, size_t count, const luminav_shard_layout* shards);
size_t sharded_workspace_bytes(const luminav_group* groups, size_t count, const luminav_shard_layout* shards);

// Shared by the drivers of this folder.
// The tensors of a call that have elements, with their positions.
struct Work {
  std::vector<luminav_tensor> tensors;
  std::vector<size_t> position;
  std::vector<uint32_t> call_position;  // luminav_step_groups: position over the whole call
  size_t total_elements = 0;
};
Work nonempty(std::span<const luminav_tensor> all);
void fill_nonempty(std::span<const luminav_tensor> all, Work& into);  // reuses into's arrays
// The groups with elements as a device backend takes them (`work` keeps the arrays).
std::vector<AsyncGroup> async_groups(std::span<const luminav_group> groups, std::span<Work> work);
ExecContext context_of(const luminav_options* options);
core::Status backend_failure(const Backend& backend, int code, const char* entry);
core::StepConstants whole_step_constants(const luminav_hyperparams& hp);
void note_last_backend(const Backend& backend);

// "name" or "name:detail" of the backend of this thread's last successful
// step, reduce or apply ("" before the first).
const char* last_backend_label();

}  // namespace luminav::dispatch
