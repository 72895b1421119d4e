// The interface every LuminaV backend implements (scalar, simd, cuda, ...).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "luminav/luminav.h"
#include "optim/core/step_constants.h"

namespace luminav {

namespace dispatch {
struct ShardedLayout;  // dispatch/sharded_layout.h
}

// Note [reduction rounds]: pass 1 is split in rounds so that sharded tensors
// can all-reduce between them (luminav.h, "pass-1 / pass-2 split").
//   CLM    round 0: nonfinite count, sum g^2 (may be left 0 when
//                   !k.grad_sq_wanted), K, sum (lr*u*phi)^2, sum x^2
//   TD-CLM round 0: nonfinite count, sum g^2
//          round 1: K, sum (lr*u*phi)^2, sum x^2 (u needs s from round 0)
// Backends fill exactly the fields of the round they are asked for and zero
// the others (core/reduction_rounds.h says which round holds what; K and the
// norms only when cautious or the tensor bound needs them). The driver never
// passes a tensor with N = 0 and reads the TD-CLM s through load_scalar. Inputs
// are validated before a backend sees them (core/validate.h); reduce writes
// nothing but `out` and the scratch; apply writes every buffer of every
// tensor (TD-CLM: exp_avg_sq[0] = globals.second_moment). Entry points return
// a LUMINAV_STATUS_* code; a backend that fails describes why through
// set_backend_error (dispatch/backend_error.h) and must not throw.
struct ExecContext {
  int device_index = 0;
  void* stream = nullptr;
  void* scratch = nullptr;       // caller workspace or nullptr
  size_t scratch_bytes = 0;
  // The reduce and apply calls of one whole step by the driver (luminav_step, luminav_step_multi),
  // not the caller's split entry points (luminav_reduce / luminav_apply): Note [device finalize].
  bool whole_step = false;
};

// One group of an asynchronous whole step (luminav_groups.h): its constants
// as the host knows them, and where a device reads what the host does not.
struct AsyncGroup {
  core::StepConstants k;       // from hp; t and lr replaced on the device when given
  std::span<const luminav_tensor> tensors;  // N > 0 each
  std::span<const uint32_t> positions;      // each tensor's position in the call (status word)
  float* step_counter;         // device fp32 t - 1, or nullptr (k.step)
  const void* lr;              // device lr, or nullptr (k.lr)
  int lr_dtype;                // LUMINAV_SCALAR_*
  double lr_host, beta1, beta2, weight_decay;  // as the caller gave them, for the device's constants
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Stable short name: "scalar", "simd", "cuda", "hip", "vulkan".
  virtual std::string_view name() const = 0;
  // Probed once, cheaply; when false, `why_not` says why in one line.
  virtual bool available(std::string* why_not) const = 0;
  // Extra detail for `luminamoon info` and luminav_last_backend(), e.g. the
  // Highway target ("AVX3") or the GPU ("sm_90 NVIDIA H200"). May be empty.
  virtual std::string detail() const { return {}; }
  // The devices the backend sees, one line each ("name (type): why it is or
  // is not used"), for `luminamoon info`. Empty where that means nothing.
  virtual std::string devices() const { return {}; }
  // Memory the backend's pointers live in (LUMINAV_DEVICE_*).
  virtual int device_type() const = 0;
  // True for an accelerator backend that reads host memory in place (e.g.
  // Vulkan on a unified-memory GPU): "auto" routing gives it host tensors of
  // at least kOffloadMinElements (dispatch/registry.h). CPU backends: false.
  virtual bool offload() const { return false; }
  // True when `address` is memory this backend's device serves (a GPU
  // backend asks its driver; managed memory counts as the device's), with
  // `device_index` (may be nullptr) set to that device. Host memory, and any
  // address when the driver cannot be used, gives false; it never fails, so
  // callers can route by memory (luminav_triton_step_f32). CPU backends: false.
  virtual bool serves_pointer(const void* address, int* device_index) const {
    (void)address;
    (void)device_index;
    return false;
  }

  // Reads one float of the backend's memory (the TD-CLM scalar s before the
  // step, which the host-side finalize needs). GPU backends override this.
  virtual int load_scalar(const float* address, float* value, const ExecContext&) {
    *value = *address;
    return LUMINAV_STATUS_OK;
  }
  // Note [device finalize]: true for a device backend whose reduce of a whole step finalizes
  // TD-CLM's round 0 on the device (s, the factors, rho) and whose apply reads them there: the
  // driver then reads no s from the device (load_scalars) and the host's globals of TD-CLM go
  // unread; the finite verdict still comes back in the partials. Such a backend refuses TD-CLM in
  // the split entry points, whose globals the caller forms (ExecContext::whole_step false).
  virtual bool finalizes_on_device(const core::StepConstants& k) const {
    (void)k;
    return false;
  }
  // load_scalar for many addresses at once (a GPU backend answers with one
  // round trip instead of one per tensor); the default calls load_scalar.
  virtual int load_scalars(std::span<const float* const> addresses, std::span<float> values,
                           const ExecContext& ctx) {
    for (size_t j = 0; j < addresses.size(); ++j) {
      if (const int code = load_scalar(addresses[j], &values[j], ctx); code != LUMINAV_STATUS_OK) return code;
    }
    return LUMINAV_STATUS_OK;
  }

  // Pass 1, read-only: one partials struct per tensor.
  virtual int reduce(const core::StepConstants& k, std::span<const luminav_tensor> tensors,
                     int round, std::span<const core::TensorGlobals> globals,
                     std::span<luminav_partials> out, const ExecContext& ctx) = 0;
  // Pass 2: moments, update, bound, decay, write-back of every tensor.
  virtual int apply(const core::StepConstants& k, std::span<const luminav_tensor> tensors,
                    std::span<const core::TensorGlobals> globals, const ExecContext& ctx) = 0;

  // Device backends: the whole step of every group enqueued on ctx.stream,
  // device-resident (luminav_groups.h): ctx.scratch is the caller's
  // workspace, laid out as dispatch/async_workspace.h says. Host backends
  // never get this call.
  virtual bool supports_async() const { return false; }
  virtual int step_async(std::span<const AsyncGroup> groups, const luminav_async& async,
                         const ExecContext& ctx) {
    (void)groups;
    (void)async;
    (void)ctx;
    return LUMINAV_STATUS_BACKEND_UNAVAILABLE;
  }
  // Host-memory backends that run on an accelerator (vulkan): the whole step
  // of `groups` enqueued, returning before it ran (luminav_step_groups_enqueue);
  // *enqueued stays false, with OK, for a call the backend does not take this
  // way, which the host-side groups driver then runs synchronously. An
  // earlier enqueued step's failure not yet reported is returned instead
  // (NONFINITE_GRAD, set_backend_error naming the tensor), nothing enqueued.
  virtual int enqueue_host_step(std::span<const AsyncGroup> groups, const luminav_async& async, bool* enqueued) {
    (void)groups;
    (void)async;
    *enqueued = false;
    return LUMINAV_STATUS_OK;
  }
  // Waits for every step enqueue_host_step made (luminav_synchronize); a
  // failure not yet reported is returned as enqueue_host_step does.
  virtual int synchronize() { return LUMINAV_STATUS_OK; }

  // Device backends: one phase of a sharded whole step (luminav_step_groups_sharded),
  // enqueued on ctx.stream: `groups` holds the tensors with elements (positions
  // over the call), `layout` the exchange's offsets by call position; ctx.scratch
  // is laid out as dispatch/async_workspace.h says for `groups`.
  virtual int step_sharded(std::span<const AsyncGroup> groups, const dispatch::ShardedLayout& layout, int phase,
                           int exchanges, const luminav_async& async, double* exchange, const ExecContext& ctx) {
    (void)groups;
    (void)layout;
    (void)phase;
    (void)exchanges;
    (void)async;
    (void)exchange;
    (void)ctx;
    return LUMINAV_STATUS_BACKEND_UNAVAILABLE;
  }
};

}  // namespace luminav
