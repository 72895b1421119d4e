/* luminav_groups.h: one call for a whole optimizer step (every param group,
 * mode and dtype), and its asynchronous, device-resident form for GPUs
 * (spec/luminav-update.md, "Asynchronous devices" and "Gradient scale").
 * Included by luminav.h; the conventions of that header hold here.
 *
 * Host backends run the call synchronously: every gradient of every group is
 * checked before anything is written, and the status says how it went.
 *
 * Device backends (CUDA) enqueue the step on options->stream and return
 * without waiting: no device-to-host copy and no synchronisation on the path
 * of a step. Pass 1's reductions, the finite verdict, TD-CLM's second moment,
 * the cautious and bound scales and the bias corrections are formed on the
 * device; pass 2 reads them from device memory and writes nothing when the
 * verdict is bad. The call can be captured in a CUDA graph and replayed
 * (every pointer below, and the workspace, must then stay valid). The
 * outcome lands in the caller's device status word (luminav_step_status),
 * copied asynchronously to pinned host memory when host_status is given.
 */
#ifndef LUMINAV_LUMINAV_GROUPS_H
#define LUMINAV_LUMINAV_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct luminav_hyperparams;
struct luminav_tensor;
struct luminav_options;

/* lr_dtype of a device learning rate. */
enum luminav_scalar_dtype { LUMINAV_SCALAR_F32 = 0, LUMINAV_SCALAR_F64 = 1 };

/* One param group: hyperparameters shared by its tensors. */
typedef struct luminav_group {
  const struct luminav_hyperparams* hp;
  const struct luminav_tensor* tensors;
  size_t count;
  /* Device backends only (NULL on the host, or to use hp->step and hp->lr):
   * step_counter: fp32 step count of the group, t - 1 before the step (the
   *   layout of torch's capturable `state["step"]`); the step runs with t and
   *   the device adds 1 when the step is applied (not when it is skipped).
   * lr: a 0-d device tensor read when the step runs (an LR scheduler's
   *   fill_ between graph replays takes effect without a recapture).
   * Host memory works too: the host driver reads them at the call, and the
   * vulkan backend's luminav_step_groups_enqueue reads and advances
   * step_counter when the step runs (lr is read at the call). */
  float* step_counter;
  const void* lr;
  int lr_dtype; /* LUMINAV_SCALAR_* */
} luminav_group;

/* The device status word (16 bytes of device memory, 4-byte aligned, zeroed
 * by the caller once). Tensor positions count over the whole call, group by
 * group, from 1 (0 means none). */
typedef struct luminav_step_status {
  uint32_t verdict;  /* the last step: 0 applied; else 1 + position of the first
                        tensor with a non-finite gradient, or
                        LUMINAV_VERDICT_FOUND_INF (GradScaler's found_inf) */
  uint32_t failed;   /* sticky (check_finite without skip_nonfinite): 1 +
                        position of the first failure; while it is not 0, every
                        later step writes nothing; the caller clears it */
  uint32_t skipped;  /* steps skipped on the device (skip_nonfinite, found_inf) */
  uint32_t refused;  /* steps not applied because `failed` was set */
} luminav_step_status;

#define LUMINAV_VERDICT_FOUND_INF 0xFFFFFFFFu

/* The asynchronous part of a device call. */
typedef struct luminav_async {
  luminav_step_status* status;      /* device memory; required */
  luminav_step_status* host_status; /* pinned host memory, or NULL: receives an
                                       asynchronous copy of *status */
  const float* grad_scale;          /* device sigma (GradScaler's scale), or NULL:
                                       hp->grad_scale */
  float* found_inf;                 /* device GradScaler found_inf, or NULL: read
                                       (non-zero skips the step, counted in
                                       `skipped`); set to 1 when the check fails */
  int skip_nonfinite;               /* 1: a non-finite gradient skips the step
                                       (counted) instead of setting `failed` */
} luminav_async;

/* Device workspace a call over `groups` needs (bytes, 256-byte aligned
 * pointer), from the tensors' sizes alone (the pointers are not read; 0 for
 * NULL arguments). It belongs to the caller, so that a captured graph keeps
 * it, and must be zeroed once before its first use (it keeps counters that
 * every step leaves at zero). */
size_t luminav_groups_workspace_bytes(const luminav_group* groups, size_t count);

/* One step of every group. The finite check covers every tensor of every
 * group before any is written. Host memory: synchronous, `async` may be NULL
 * (when given, its status is filled too). Device memory: `async` is required,
 * options->scratch must hold luminav_groups_workspace_bytes of device memory,
 * and the status codes report only what the host could check (arguments,
 * launches); NONFINITE_GRAD comes through async->status. */
int luminav_step_groups(const luminav_group* groups, size_t count, const struct luminav_options* options,
                        const luminav_async* async);

/* luminav_step_groups that may return before the step ran where the backend
 * runs host memory on an accelerator: Vulkan (backend "vulkan", or "auto" on
 * a unified-memory GPU) with CLM groups of at most 64 tensors in a call
 * (every option and dtype; step_counter and found_inf are then read and
 * written when the step runs, lr and grad_scale read when the call is made);
 * TD-CLM and larger calls run as luminav_step_groups does (the last line of
 * luminav_backend_devices says so). Pass 1, the finite verdict, the cautious and
 * bound scales and pass 2 run in one submission on the device; pass 2 is
 * skipped there when the verdict is bad (nothing is written), and a failure
 * (check_finite without skip_nonfinite) makes every later step write nothing
 * until it is reported. It is reported by the first call that finds it: a
 * later luminav_step_groups_enqueue (which then waits for the steps still in
 * flight and enqueues nothing) or luminav_synchronize, with
 * LUMINAV_STATUS_NONFINITE_GRAD and a message naming the tensor; reporting
 * clears it. async->status is host memory here: it receives a copy of the
 * backend's status word (one per process) when the step is seen complete,
 * so it must stay valid until luminav_synchronize returns.
 * The device reads and writes the caller's arrays in place (or through
 * staging buffers copied back when the step completes): they must stay
 * allocated and must not be read or written by the host until
 * luminav_synchronize returns (or a synchronous luminav_step* call on the
 * same backend, which waits first, has returned). async->grad_scale, when
 * given, is read when the call is made. */
int luminav_step_groups_enqueue(const luminav_group* groups, size_t count, const struct luminav_options* options,
                                const luminav_async* async);

/* Waits for every step the backend of `options` has in flight (NULL or
 * "auto", unless LUMINAV_FORCE_BACKEND names one: every backend's) and
 * returns LUMINAV_STATUS_NONFINITE_GRAD for a failure not yet reported (then
 * cleared), else OK. Backends without such steps return OK at once (CUDA
 * steps are ordered on their stream: synchronize the stream). */
int luminav_synchronize(const struct luminav_options* options);

/* --- Sharded tensors: the whole step in phases around one all-reduce -------
 * For groups whose tensors are shards of logical tensors (FSDP2/DTensor
 * Shard(0): whole rows, index_offset the shard's first logical index), every
 * sum of spec "Objects" is over the logical tensor. The step runs in phases
 * 0..P (P = luminav_sharded_exchanges, 1 or 2); between phase p and p + 1
 * the caller all-reduces (SUM, in place) the exchange buffer of
 * luminav_sharded_exchange_doubles float64s over the process group that
 * shards every tensor of the call:
 *   phase 0 .. P-1: (p > 0: folds the reduced exchange of round p-1 into the
 *                    workspace: finite verdict, TD-CLM s / rho / R / column
 *                    sums, cautious and bound scales) then writes this
 *                    shard's pass-1 partials of round p into the exchange:
 *                    every tensor's counts and sums, TD-CLM factored column
 *                    sums of g^2, the row-factor sums, and a header that
 *                    carries a non-zero async->found_inf;
 *   phase P:         folds the last exchange and applies (pass 2, commit).
 * The exchange's layout depends on the modes and the logical shapes alone
 * (`shards`, one per tensor of the call, group by group), so it is the same
 * on every rank, an empty shard included. Every rank reaches the same
 * verdict from the same reduced numbers: a non-finite gradient on any shard
 * (or found_inf on any rank) makes every rank write nothing. Call every
 * phase on every rank even then (later phases exchange zeros), so the
 * collectives stay matched and the sequence can be captured.
 * Host memory: synchronous; the last phase returns NONFINITE_GRAD (unless
 * skip_nonfinite) and fills async->status when given. Device memory: every
 * phase is enqueued on options->stream (no host synchronisation; the
 * all-reduce must be ordered on that stream too, as torch.distributed's
 * NCCL collectives are), the verdict lands in async->status.
 * The workspace (options->scratch; host or device memory like the tensors,
 * luminav_sharded_workspace_bytes, zeroed once) carries the state between
 * phases: it must not change between the phases of one step. */
typedef struct luminav_shard_layout {
  uint64_t logical_num_elements; /* N of the logical tensor */
  uint64_t logical_rows;         /* R of the logical tensor (TD-CLM factored/row; else ignored) */
} luminav_shard_layout;

/* P: the exchanges of a step over `groups` (max over groups of the reduction
 * rounds, at least 1); -status when a group's hyperparameters are invalid. */
int luminav_sharded_exchanges(const luminav_group* groups, size_t count);
/* float64s of the exchange buffer (0 for NULL arguments). */
size_t luminav_sharded_exchange_doubles(const luminav_group* groups, size_t count,
                                        const luminav_shard_layout* shards);
/* Workspace bytes (0 for NULL arguments). */
size_t luminav_sharded_workspace_bytes(const luminav_group* groups, size_t count,
                                       const luminav_shard_layout* shards);
/* Phase `phase` of one sharded step (see above). */
int luminav_step_groups_sharded(const luminav_group* groups, size_t count,
                                const luminav_shard_layout* shards, const struct luminav_options* options,
                                const luminav_async* async, int phase, double* exchange);

#ifdef __cplusplus
}
#endif

#endif /* LUMINAV_LUMINAV_GROUPS_H */
