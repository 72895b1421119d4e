// The triton-aot backend: luminav_step on CUDA memory through the Triton AOT
// kernels (build_triton_aot.py), loaded from the manifest beside the library.
#include "optim/triton/triton_aot_backend.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/cuda/device_pointer_cache.h"
#include "optim/dispatch/backend_error.h"
#include "optim/triton/triton_aot_batches.h"
#include "optim/triton/triton_aot_clm_step.h"
#include "optim/triton/triton_aot_tdclm_step.h"

namespace luminav {
namespace triton_aot {

namespace {

using cuda::drv::CUcontext;
using cuda::drv::CUdeviceptr;
using cuda::drv::CUresult;
using cuda::drv::CUstream;

const cuda::CudaDriver& driver() { return cuda::CudaDriver::instance(); }

int fail(int code, std::string message) {
  set_backend_error(std::move(message));
  return code;
}

// The step's small device block: constants, words, and the placeholders.
struct DeviceBlock {
  float k[8];        // lr, 1 - lr*wd, 1/(1-beta1^t), 1/(1-beta2^t), 1/sigma (triton_kernels.py)
  int64_t step;      // t
  int32_t words[2];  // blocked, first failing position
  float gl[4];       // a CLM tensor's globals (written by finalize, unread by the CLM variants)
  float unused[4];
};
constexpr int32_t kNoBad = 0x7FFFFFFF;  // triton_kernels.NO_BAD

// Note [triton-aot async step]: luminav_step_groups on device memory (step_async) keeps every
// value of the step on the device, as the cuda backend's step does: per group, prepare_kernel
// forms the constants and t from hp64 and the group's fp32 step counter; pass 1 of every tensor
// of every group sets the shared words (the smallest failing call position); pass 2 of every
// tensor writes nothing when they hold a failure; commit_kernel writes the verdict into the
// caller's status word and advance_kernel each group's counter. The host's values reach the
// device by cuMemsetD32Async (a value in the call, nothing staged, nothing waited for), and the
// status goes to pinned host memory by an asynchronous copy. Nothing waits for the device, except
// where a call needs more scratch than it had (the first step): the old buffers are freed after the
// kernels queued on them. What the AOT set has no kernel for (a device lr, GradScaler's scale and
// found_inf, skip_nonfinite) is refused before a launch.
//
// Note [triton-aot capture]: the step can be captured in a CUDA graph (torch.cuda.graph) once it has
// run eagerly with the same workspace. Its scratch belongs to the caller's workspace (ctx.scratch),
// not to the stream: torch captures on a stream of its own, and a first step there would allocate,
// which a capture forbids (the capture would be invalidated). So a capture that would allocate is
// refused with a clear error instead, and so is a group without a device step counter (the graph
// would replay one t forever). A capture records a memset of every host word, and from then on every
// eager step of that scratch sets every word too: a replay writes the captured values, so what an
// eager step last set may no longer be in the block.
//
// Note [triton-aot batches]: a step (the asynchronous one, and luminav_step's passes) launches the
// multi-tensor kernels (Note [AOT tensor tables] in build_triton_aot.py) for the tensors of one group
// that share a class (CLM of one dtype pair; factored TD-CLM of one dtype pair and sums tile): the
// Llama 98M step went from ~450 launches to 10. Their tables (sizes, the addresses of parameters,
// state and each member's own factor scratch) and program maps stay in the workspace (luminav_step:
// the stream's buffers) while the same tensors are stepped (the plan's key, batch_key); the
// gradients have a table of their own, copied from the host only when an address changed
// (zero_grad(set_to_none=True) may move them). Copies from pageable memory are staged by the driver
// before the call returns, so nothing waits for the device. A capture cannot copy from pageable
// memory: it copies the gradient table from a pinned slot that keeps those addresses for as long as
// the graph may replay (kCapturedGradientSets of them per workspace). A replay writes that table, so
// an eager step of a captured workspace copies its gradients again; and since a graph reads the
// workspace's tables, those are never rewritten once captured: a step whose tensors differ from the
// plan's then launches each tensor on its own, as does a capture before any eager step, or one that
// finds every pinned slot taken by other gradients.
struct GroupBlock {
  float k[8];        // prepare_kernel's constants
  int64_t step;      // t
  double hp64[4];    // beta1, beta2, weight_decay, lr (the host's values)
  float counter;     // t - 1 of a group without a device step counter
  float unused[3];
  float gl[4];       // a CLM tensor's globals placeholder
  float pad[6];
};
static_assert(sizeof(GroupBlock) == 128);
constexpr size_t kHostWordsPerGroup = 9;  // hp64 (8 words), then counter

// Buffers of one stream, or of one caller workspace (Note [triton-aot workspaces]).
struct DeviceBuffer {
  CUdeviceptr address = 0;
  size_t bytes = 0;
};
struct StreamWork {
  CUdeviceptr block = 0;
  DeviceBuffer partials;
  DeviceBuffer group_blocks;  // the asynchronous step's GroupBlock of each group (Note [triton-aot async step])
  // The host words last set in each group block (hp64, then the counter), so that only changed
  // ones are set again; cleared when the blocks move.
  struct HostWords {
    std::array<uint32_t, kHostWordsPerGroup> value{};
    uint32_t set = 0;  // bit w: value[w] is in the block
  };
  std::vector<HostWords> group_words;
  bool captured = false;  // a graph holds memsets of these blocks (Note [triton-aot capture])
  CUstream last_stream = nullptr;  // where the last call queued kernels reading these buffers
  uint64_t last_used = 0;          // DeviceState::clock at the last call
  // TD-CLM (Note [device finalize]): the row and column sums (reused tensor after tensor) and
  // each tensor's globals and new factors, written by its finalize in reduce, read by apply.
  DeviceBuffer row_partials, col_partials, regions;
  int32_t* host_words = nullptr;  // pinned
  std::vector<double> host_partials;
  // The batches of the steps on these buffers (Note [triton-aot batches]).
  DeviceBuffer batch_tables, batch_scratch, gradient_table;
  struct Batches {
    std::vector<uint64_t> key;  // batch_key of the tensors `plan` was made for
    BatchPlan plan;
    std::array<uint64_t, 3> written{};  // the regions, scratch and tables buffers the device tables were written for
    std::vector<uint64_t> gradients;    // what the gradient table holds after the last eager step
    std::vector<std::vector<uint64_t>> captured;  // the gradient sets of the captured steps, one per pinned slot
    uint64_t* pinned = nullptr;                   // kCapturedGradientSets slots of pinned_count addresses
    size_t pinned_count = 0;
  } batches;
};
// Gradient sets a workspace's captured steps may hold (Note [triton-aot batches]); a capture of
// another set steps its tensors one at a time.
constexpr size_t kCapturedGradientSets = 4;

// Note [triton-aot workspaces]: the kernels of one device are loaded once; each
// stream gets its own device block and partials, so that steps on different
// streams never share the constants a queued kernel still reads. The
// asynchronous step's are kept per caller workspace instead (Note [triton-aot
// capture]): one optimizer's steps never run at once. A call holds
// the device's mutex from its first launch to its return. A TD-CLM tensor's
// globals and factors stay in its stream's regions from the reduce to the apply
// of the driver's whole step: two threads stepping on one stream at once race
// there (as their kernels would on the tensors).
struct DeviceState {
  std::mutex mutex;
  bool ready = false;
  std::string why_not;
  CUcontext context = nullptr;
  CudaKernels kernels;
  std::map<CUstream, StreamWork> streams;
  std::map<const void*, StreamWork> workspaces;  // the asynchronous step's, keyed by the caller's workspace
  uint64_t clock = 0;
  // A process that makes optimizer after optimizer over new workspaces keeps at most this many
  // workspaces' scratch that no graph captured (the least recently used one is freed); a captured
  // one is kept, since its graph may replay.
  static constexpr size_t kMaxUncapturedWorkspaces = 8;
};

class TritonAotBackend final : public Backend {
 public:
  std::string_view name() const override { return "triton-aot"; }
  int device_type() const override { return LUMINAV_DEVICE_CUDA; }

  bool available(std::string* why_not) const override {
    if (!manifest_ok(why_not)) return false;
    if (!driver().usable()) {
      *why_not = driver().why_not();
      return false;
    }
    DeviceState* state = nullptr;
    if (!const_cast<TritonAotBackend*>(this)->device_state(0, &state, why_not)) return false;
    return true;
  }

  std::string detail() const override {
    std::string why;
    DeviceState* state = nullptr;
    if (!const_cast<TritonAotBackend*>(this)->device_state(0, &state, &why) || state->kernels.kernels().empty()) {
      return {};
    }
    return state->kernels.kernels().front().arch + " Triton " + manifest().triton_version;
  }

  bool serves_pointer(const void* address, int* device_index) const override {
    if (address == nullptr || !driver().usable()) return false;
    DeviceState* state = nullptr;
    std::string why;
    if (!const_cast<TritonAotBackend*>(this)->device_state(0, &state, &why)) return false;
    Scope scope(*state);
    if (!scope.ok || !cuda::query_device_memory(driver().api(), address)) return false;
    if (device_index != nullptr) {
      int ordinal = 0;
      const CUresult r = driver().api().cuPointerGetAttribute(
          &ordinal, cuda::drv::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, reinterpret_cast<CUdeviceptr>(address));
      *device_index = r == cuda::drv::CUDA_SUCCESS && ordinal >= 0 ? ordinal : 0;
    }
    return true;
  }

  // Note [device finalize]: TD-CLM's s and factors are formed on the device between reduce and
  // apply; its old s is never read by the host (the driver skips load_scalars for a whole step).
  bool finalizes_on_device(const core::StepConstants& k) const override { return k.tdclm != 0; }
  int load_scalar(const float*, float*, const ExecContext&) override {
    return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE, kWholeStepsOnly);
  }
  int load_scalars(std::span<const float* const>, std::span<float>, const ExecContext&) override {
    return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE, kWholeStepsOnly);
  }

  // Round 0 of a step: the finite check of every tensor on the device (TD-CLM:
  // its sums and their finalize, s or the new factors staying on the device),
  // one copy of the words and one synchronisation; the first failing tensor's
  // nonfinite count is then counted exactly (its pass 1 once more, read back).
  int reduce(const core::StepConstants& k, std::span<const luminav_tensor> tensors, int round,
             std::span<const core::TensorGlobals>, std::span<luminav_partials> out, const ExecContext& ctx) override {
    std::fill(out.begin(), out.end(), luminav_partials{});
    if (int code = check_supported(k, tensors, ctx); code != LUMINAV_STATUS_OK) return code;
    if (!core::round_has_grad_sums(round) || tensors.empty()) return LUMINAV_STATUS_OK;
    Call call(*this, ctx, k, tensors);
    if (call.code != LUMINAV_STATUS_OK) return call.code;
    if (int code = call.upload(k); code != LUMINAV_STATUS_OK) return code;
    const cuda::drv::Api& a = driver().api();
    if (int code = call.launch_pass(1, {&call.buffers, 1}); code != LUMINAV_STATUS_OK) return code;
    CUresult r = a.cuMemcpyDtoHAsync(call.work->host_words, call.buffers.words, 2 * sizeof(int32_t), call.stream);
    if (r == cuda::drv::CUDA_SUCCESS) r = a.cuStreamSynchronize(call.stream);
    if (r != cuda::drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyDtoHAsync", r));
    const int32_t first_bad = call.work->host_words[1];
    if (first_bad == kNoBad) return LUMINAV_STATUS_OK;
    if (first_bad < 0 || static_cast<size_t>(first_bad) >= tensors.size()) {
      return fail(LUMINAV_STATUS_INTERNAL, "triton-aot: the finite check reported position " +
                                               std::to_string(first_bad) + " of " + std::to_string(tensors.size()));
    }
    return count_nonfinite(call, tensors[first_bad], static_cast<size_t>(first_bad), k, &out[first_bad]);
  }

  // Pass 2 of every tensor (TD-CLM: from the globals and factors its reduce left on the device;
  // the host's `globals` are not read, Note [device finalize]).
  int apply(const core::StepConstants& k, std::span<const luminav_tensor> tensors,
            std::span<const core::TensorGlobals>, const ExecContext& ctx) override {
    if (int code = check_supported(k, tensors, ctx); code != LUMINAV_STATUS_OK) return code;
    Call call(*this, ctx, k, tensors);
    if (call.code != LUMINAV_STATUS_OK) return call.code;
    if (int code = call.upload(k); code != LUMINAV_STATUS_OK) return code;
    return call.launch_pass(2, {&call.buffers, 1});
  }

  bool supports_async() const override { return true; }
  int step_sharded(std::span<const AsyncGroup>, const dispatch::ShardedLayout&, int, int, const luminav_async&,
                   double*, const ExecContext&) override {
    return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                "backend 'triton-aot' has no sharded step (luminav_step_groups_sharded): the cuda backend runs it");
  }

  // luminav_step_groups on device memory (Note [triton-aot async step]). The caller's workspace
  // (ctx.scratch) names the scratch this backend keeps for it (Note [triton-aot capture]); its own
  // bytes are not used.
  int step_async(std::span<const AsyncGroup> groups, const luminav_async& async, const ExecContext& ctx) override {
    const char* refused = async.grad_scale ? "a device grad_scale (GradScaler)"
                          : async.found_inf ? "found_inf (GradScaler)"
                          : async.skip_nonfinite ? "skip_nonfinite" : nullptr;
    for (const AsyncGroup& g : groups) {
      if (refused == nullptr && g.lr != nullptr) refused = "a device lr (a tensor lr)";
    }
    if (refused != nullptr) {
      return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                  std::string("backend 'triton-aot' has no kernel for ") + refused +
                      " in the asynchronous step (its AOT set reads lr, the gradient scale 1 and the finite "
                      "verdict as the host gives them; the cuda backend and LuminaV(backend='triton') run it)");
    }
    ExecContext whole = ctx;
    whole.whole_step = true;
    std::vector<StepTensor> plans;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      if (int code = check_supported(g.k, g.tensors, whole); code != LUMINAV_STATUS_OK) return code;
      if (g.step_counter == nullptr && g.k.step > (uint64_t{1} << 24)) {
        return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                    "backend 'triton-aot': a step above 2^24 needs a device step_counter of its group (its "
                    "kernels take t from an fp32 counter)");
      }
      for (size_t j = 0; j < g.tensors.size(); ++j) {
        plans.push_back(plan_of(g.k, g.tensors[j], g.positions[j]));
        plans.back().group = gi;
      }
    }
    Call call(*this, whole, std::move(plans), groups.size());
    if (call.code != LUMINAV_STATUS_OK) return call.code;
    for (const AsyncGroup& g : groups) {
      if (call.capturing && g.step_counter == nullptr) {  // Note [triton-aot capture]
        return fail(LUMINAV_STATUS_INVALID_ARGUMENT,
                    "backend 'triton-aot': a step captured in a CUDA graph needs a device step_counter in every "
                    "group (a host step count would be replayed unchanged)");
      }
    }
    if (!is_device_memory(async.status)) {
      return fail(LUMINAV_STATUS_INVALID_ARGUMENT, "async.status must be CUDA device memory");
    }
    const CudaKernels& kernels = call.state->kernels;
    std::vector<ClmStepBuffers> buffers(groups.size(), call.buffers);
    std::string why;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const CUdeviceptr block = call.work->group_blocks.address + gi * sizeof(GroupBlock);
      ClmStepBuffers& b = buffers[gi];
      b.k = block + offsetof(GroupBlock, k);
      b.step = block + offsetof(GroupBlock, step);
      b.hp64 = block + offsetof(GroupBlock, hp64);
      b.gl = block + offsetof(GroupBlock, gl);
      b.counter = groups[gi].step_counter ? reinterpret_cast<uint64_t>(groups[gi].step_counter)
                                          : block + offsetof(GroupBlock, counter);
      b.status = reinterpret_cast<uint64_t>(async.status);
      if (int code = set_host_words(call, gi, groups[gi], block); code != LUMINAV_STATUS_OK) return code;
      if (!launch_prepare(kernels, b, call.stream, &why)) return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    }
    // Pass 1 of every tensor before any pass 2: the finite check covers the call.
    if (int code = call.launch_pass(1, buffers); code != LUMINAV_STATUS_OK) return code;
    if (int code = call.launch_pass(2, buffers); code != LUMINAV_STATUS_OK) return code;
    if (!launch_commit(kernels, buffers.front(), call.stream, &why)) return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    for (const ClmStepBuffers& b : buffers) {
      if (!launch_advance(kernels, b, call.stream, &why)) return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    }
    if (async.host_status != nullptr) {
      const CUresult r = driver().api().cuMemcpyDtoHAsync(
          async.host_status, reinterpret_cast<CUdeviceptr>(async.status), sizeof(luminav_step_status), call.stream);
      if (r != cuda::drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyDtoHAsync", r));
    }
    return LUMINAV_STATUS_OK;
  }

 private:
  static constexpr const char* kWholeStepsOnly =
      "backend 'triton-aot' finalizes TD-CLM on the device and runs it in whole steps only (luminav_step, "
      "luminav_step_multi, luminav_triton_step_f32); luminav_reduce/luminav_apply of TD-CLM run on a CPU "
      "backend or on cuda (td_factor tensor)";

  // The manifest beside the library, checked once per process.
  struct Checked {
    bool ok = false;
    std::string why_not;
    cuda::KernelManifest manifest;
  };
  static const Checked& checked() {
    static const Checked c = [] {
      Checked r;
      r.ok = check_kernel_directory(kernel_directory(), &r.manifest, &r.why_not);
      return r;
    }();
    return c;
  }
  static bool manifest_ok(std::string* why) {
    if (!checked().ok) *why = checked().why_not;
    return checked().ok;
  }
  static const cuda::KernelManifest& manifest() { return checked().manifest; }

  bool device_state(int ordinal, DeviceState** out, std::string* why) {
    std::string reason;
    if (!manifest_ok(&reason)) {
      *why = reason;
      return false;
    }
    DeviceState* state = nullptr;
    {
      std::lock_guard lock(devices_mutex_);
      auto& slot = devices_[ordinal];
      if (!slot) slot = std::make_unique<DeviceState>();
      state = slot.get();
    }
    std::lock_guard lock(state->mutex);
    if (!state->ready && state->why_not.empty()) {
      const cuda::drv::Api& a = driver().api();
      cuda::drv::CUdevice device = 0;
      cuda::DirectoryArtifactStore store(kernel_directory() + "/cuda");
      if (CUresult r = a.cuDeviceGet(&device, ordinal); r != cuda::drv::CUDA_SUCCESS) {
        state->why_not = driver().error("cuDeviceGet", r);
      } else if (CUresult r2 = a.cuDevicePrimaryCtxRetain(&state->context, device); r2 != cuda::drv::CUDA_SUCCESS) {
        state->why_not = driver().error("cuDevicePrimaryCtxRetain", r2);
      } else {
        CUcontext previous = nullptr;
        a.cuCtxGetCurrent(&previous);
        if (!CudaKernels::load(driver(), store, ordinal, &state->kernels, &reason)) {
          state->why_not = "Triton AOT kernels in " + kernel_directory() + "/cuda: " + reason;
        } else {
          state->ready = true;
        }
        a.cuCtxSetCurrent(previous);  // load made the primary context current; the caller's comes back
      }
    }
    if (!state->ready) {
      *why = state->why_not;
      return false;
    }
    *out = state;
    return true;
  }

  // The device's primary context current on this thread for the scope.
  struct Scope {
    bool ok = false;
    explicit Scope(const DeviceState& s) { ok = driver().api().cuCtxPushCurrent(s.context) == cuda::drv::CUDA_SUCCESS; }
    ~Scope() {
      CUcontext popped = nullptr;
      if (ok) driver().api().cuCtxPopCurrent(&popped);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // Note [device pointer cache] (optim/cuda/device_pointer_cache.h)
  static bool is_device_memory(const void* p) { return cuda::is_device_memory(driver().api(), p); }

  // What the kernel set holds (Note [AOT kernel set]); anything else is refused
  // before a launch, naming the option and where it runs.
  static int check_supported(const core::StepConstants& k, std::span<const luminav_tensor> tensors,
                             const ExecContext& ctx) {
    if (k.tdclm && !ctx.whole_step) return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE, kWholeStepsOnly);
    const char* option = k.lam != 0.0f ? "lam" : k.tau != 0.0f ? "tau" : k.cautious ? "cautious"
                         : k.bound_mode != 0 ? "bound_mode" : k.inv_grad_scale != 1.0f ? "grad_scale" : nullptr;
    if (option != nullptr) {
      return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                  std::string("backend 'triton-aot' has no kernel for ") + option +
                      " (its AOT set is the AdamW-form CLM and TD-CLM step; the cuda backend and "
                      "LuminaV(backend='triton') run every option)");
    }
    if (k.step >= (uint64_t{1} << 53)) {
      return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE, "backend 'triton-aot': step must be below 2^53");
    }
    for (size_t j = 0; j < tensors.size(); ++j) {
      const luminav_tensor& t = tensors[j];
      const bool f32 = t.param_dtype == LUMINAV_DTYPE_F32 && t.grad_dtype == LUMINAV_DTYPE_F32 && t.master == nullptr;
      const bool bf16 = t.param_dtype == LUMINAV_DTYPE_BF16 && t.grad_dtype == LUMINAV_DTYPE_BF16 &&
                        t.master != nullptr && k.stochastic_rounding;
      if (!f32 && !bf16) {
        return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                    "tensors[" + std::to_string(j) +
                        "]: backend 'triton-aot' has kernels for fp32 parameters and gradients without masters, "
                        "and for bf16 ones with fp32 masters and stochastic rounding only");
      }
    }
    return LUMINAV_STATUS_OK;
  }

  static ClmTensor clm_tensor(const luminav_tensor& t, size_t position) {
    ClmTensor c;
    c.param = reinterpret_cast<uint64_t>(t.param);
    c.grad = reinterpret_cast<uint64_t>(t.grad);
    c.exp_avg = reinterpret_cast<uint64_t>(t.exp_avg);
    c.exp_avg_sq = reinterpret_cast<uint64_t>(t.exp_avg_sq);
    c.master = reinterpret_cast<uint64_t>(t.master);
    c.n = static_cast<int64_t>(t.num_elements);
    c.seed = static_cast<int64_t>(t.seed);
    c.index_offset = static_cast<int64_t>(t.index_offset);
    c.position = static_cast<int64_t>(position);
    c.bf16 = t.param_dtype == LUMINAV_DTYPE_BF16;
    return c;
  }

  // A tensor's launches (its region, TdclmTensor::gl, is set by Call; a TD-CLM tensor with C = 1
  // steps as CLM, core/second_moment_layout.h).
  static StepTensor plan_of(const core::StepConstants& k, const luminav_tensor& t, size_t position) {
    StepTensor p;
    p.t.t = clm_tensor(t, position);
    const core::MomentLayout l = core::moment_layout(k.tdclm != 0, t);
    p.tdclm = l.kind != core::SecondMoment::kElementwise;
    p.t.form = static_cast<TdclmForm>(static_cast<int>(l.kind));
    p.t.rows = core::has_row_factor(l) ? static_cast<int64_t>(l.rows) : p.t.t.n;
    p.t.cols = core::has_row_factor(l) ? static_cast<int64_t>(l.cols) : 1;
    p.s = scalars(k);
    return p;
  }
  static std::vector<StepTensor> plans_of(const core::StepConstants& k, std::span<const luminav_tensor> tensors) {
    std::vector<StepTensor> plans(tensors.size());
    for (size_t j = 0; j < tensors.size(); ++j) plans[j] = plan_of(k, tensors[j], j);
    return plans;
  }

  static ClmScalars scalars(const core::StepConstants& k) {
    return {k.beta1, k.one_minus_beta1, k.beta2, k.one_minus_beta2, k.eps};
  }

  // One entry point's hold on a device and stream: the context pushed, the
  // pointers checked, the stream's buffers sized and the step's block uploaded
  // (the host's constants, the words open).
  struct Call {
    int code = LUMINAV_STATUS_OK;
    DeviceState* state = nullptr;
    StreamWork* work = nullptr;
    CUstream stream = nullptr;
    bool capturing = false;  // the stream is being captured in a CUDA graph
    ClmStepBuffers buffers;
    TdclmScratch scratch;
    std::vector<StepTensor> plans;
    // The call's plan of batches (Note [triton-aot batches]); null where its tensors step on their own.
    const BatchPlan* batch_plan = nullptr;
    std::unique_lock<std::mutex> lock;
    std::unique_ptr<Scope> scope;

    Call(TritonAotBackend& backend, const ExecContext& ctx, const core::StepConstants& k,
         std::span<const luminav_tensor> tensors)
        : Call(backend, ctx, plans_of(k, tensors), 0) {}

    // `plan_list`: every tensor of the call; `groups`: the asynchronous step's group blocks.
    Call(TritonAotBackend& backend, const ExecContext& ctx, std::vector<StepTensor> plan_list, size_t groups)
        : plans(std::move(plan_list)) {
      std::string why;
      if (!backend.device_state(ctx.device_index, &state, &why)) {
        code = fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE, why);
        return;
      }
      lock = std::unique_lock(state->mutex);
      scope = std::make_unique<Scope>(*state);
      if (!scope->ok) {
        code = fail(LUMINAV_STATUS_DRIVER_ERROR, "triton-aot: cuCtxPushCurrent failed");
        return;
      }
      for (const StepTensor& p : plans) {
        if (!is_device_memory(reinterpret_cast<const void*>(p.t.t.param)) ||
            !is_device_memory(reinterpret_cast<const void*>(p.t.t.grad))) {
          code = fail(LUMINAV_STATUS_INVALID_ARGUMENT, "tensors[" + std::to_string(p.t.t.position) +
                                                           "]: param and grad must be CUDA device memory");
          return;
        }
      }
      stream = static_cast<CUstream>(ctx.stream);
      capturing = driver().stream_capturing(stream);
      // Note [triton-aot capture]: the asynchronous step's scratch is its workspace's.
      work = groups > 0 && ctx.scratch != nullptr ? &workspace_work(*state, ctx.scratch, capturing) : &state->streams[stream];
      work->last_used = ++state->clock;
      // The same tensors give the same regions in reduce and apply (the driver's whole step).
      size_t partials = 0, row_partials = 0, col_partials = 0, regions = 0;
      std::vector<size_t> region_offset(plans.size(), 0);
      for (size_t j = 0; j < plans.size(); ++j) {
        // count_nonfinite runs CLM's finite check on any tensor: its partials fit too.
        partials = std::max(partials, clm_partials_bytes(state->kernels, plans[j].t.t.n));
        if (!plans[j].tdclm) continue;
        partials = std::max(partials, tdclm_partials_bytes(state->kernels, plans[j].t));
        row_partials = std::max(row_partials, tdclm_row_partials_bytes(plans[j].t));
        col_partials = std::max(col_partials, tdclm_col_partials_bytes(plans[j].t));
        region_offset[j] = regions;
        regions += tdclm_region_bytes(plans[j].t);
      }
      plan_batches_of_step();
      const BatchPlan none;
      const BatchPlan& batch = batch_plan != nullptr ? *batch_plan : none;
      const std::pair<DeviceBuffer*, size_t> needs[] = {{&work->partials, partials},
                                                         {&work->row_partials, row_partials},
                                                         {&work->col_partials, col_partials},
                                                         {&work->regions, regions},
                                                         {&work->group_blocks, groups * sizeof(GroupBlock)},
                                                         {&work->batch_tables, batch.table_bytes},
                                                         {&work->batch_scratch, batch.scratch_bytes},
                                                         {&work->gradient_table, batch.gradients * sizeof(uint64_t)}};
      bool grows = work->block == 0;
      for (const auto& [buffer, bytes] : needs) grows = grows || buffer->bytes < bytes;
      if (grows && capturing) {
        code = fail(LUMINAV_STATUS_INVALID_ARGUMENT,
                    "backend 'triton-aot': the first step of a workspace (or one with larger tensors) allocates its "
                    "scratch, which a CUDA graph capture forbids: run one step with the same workspace before the "
                    "capture (a warm-up step)");
        return;
      }
      const CUdeviceptr blocks_before = work->group_blocks.address;
      if (grows && work->last_stream != nullptr && work->last_stream != stream) {
        driver().api().cuStreamSynchronize(work->last_stream);  // its kernels may still read the old buffers
      }
      bool allocated = allocate(work, &why);
      for (const auto& [buffer, bytes] : needs) allocated = allocated && grow(buffer, bytes, stream, &why);
      if (!allocated) {
        code = fail(LUMINAV_STATUS_OUT_OF_MEMORY, why);
        return;
      }
      work->last_stream = stream;
      if (capturing) work->captured = true;  // its graph sets the host words from now on
      if (work->group_blocks.address != blocks_before) work->group_words.clear();  // the words set are gone
      for (size_t j = 0; j < plans.size(); ++j) {
        if (!plans[j].tdclm) continue;
        plans[j].t.gl = work->regions.address + region_offset[j];
        plans[j].t.factors = plans[j].t.gl + 4 * sizeof(float);
      }
      scratch.row_partials = work->row_partials.address;
      scratch.col_partials = work->col_partials.address;
      buffers.k = work->block + offsetof(DeviceBlock, k);
      buffers.step = work->block + offsetof(DeviceBlock, step);
      buffers.words = work->block + offsetof(DeviceBlock, words);
      buffers.gl = work->block + offsetof(DeviceBlock, gl);
      buffers.unused = work->block + offsetof(DeviceBlock, unused);
      buffers.partials = work->partials.address;
      code = point_batches();
    }

    // Note [triton-aot batches]: the plan of the call's batches (batch_plan), kept in its StreamWork
    // while its tensors are the same; made anew only where no graph holds the old one's tables (not
    // while capturing, nor once the workspace was captured): else batch_plan stays null and every
    // tensor steps on its own.
    void plan_batches_of_step() {
      StreamWork::Batches& wb = work->batches;
      std::vector<uint64_t> key = batch_key(plans);
      if (key == wb.key) {  // (the empty plan of no tensors too)
        batch_plan = &wb.plan;
      } else if (!capturing && !work->captured) {
        wb.plan = plan_batches(plans);
        wb.key = std::move(key);
        wb.written = {};
        batch_plan = &wb.plan;
      }
    }

    // The batches' device tables written where they do not hold this step's yet, and the gradient
    // table pointed at this step's gradients (Note [triton-aot batches]); batch_plan becomes null
    // (every tensor on its own) where a capture or a captured workspace may not write the tables, or
    // a capture finds every pinned gradient set taken. Once per call, at its end of setup.
    int point_batches() {
      if (batch_plan == nullptr || batch_plan->batches.empty()) return LUMINAV_STATUS_OK;
      StreamWork::Batches& wb = work->batches;
      const cuda::drv::Api& a = driver().api();
      const std::array<uint64_t, 3> where = {work->regions.address, work->batch_scratch.address,
                                             work->batch_tables.address};
      const size_t count = batch_plan->gradients;
      if (wb.written != where) {
        if (capturing || work->captured) {  // a graph's tables stay as they are
          batch_plan = nullptr;
          return LUMINAV_STATUS_OK;
        }
        // (pageable sources: the driver stages them before returning, as upload's)
        const std::vector<uint8_t> image = batch_tables(*batch_plan, plans, work->batch_scratch.address);
        if (CUresult r = a.cuMemcpyHtoDAsync(work->batch_tables.address, image.data(), image.size(), stream);
            r != cuda::drv::CUDA_SUCCESS) {
          return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyHtoDAsync", r));
        }
        if (wb.pinned_count < count) {  // (no graph reads the old slots: none was captured)
          if (wb.pinned != nullptr) a.cuMemFreeHost(wb.pinned);
          wb.pinned = nullptr;
          wb.pinned_count = 0;
          void* pinned = nullptr;
          if (CUresult r = a.cuMemAllocHost(&pinned, kCapturedGradientSets * count * sizeof(uint64_t));
              r != cuda::drv::CUDA_SUCCESS) {
            return fail(LUMINAV_STATUS_OUT_OF_MEMORY, driver().error("cuMemAllocHost", r));
          }
          wb.pinned = static_cast<uint64_t*>(pinned);
          wb.pinned_count = count;
        }
        wb.captured.clear();
        wb.gradients.clear();
        wb.written = where;
      }
      std::vector<uint64_t> gradients = batch_gradients(*batch_plan, plans);
      const void* source = gradients.data();
      if (capturing) {
        // The graph copies the table from a pinned slot that keeps these addresses for as long as it
        // may replay (a pageable copy cannot be captured).
        size_t slot = 0;
        while (slot < wb.captured.size() && wb.captured[slot] != gradients) ++slot;
        if (slot == wb.captured.size()) {
          if (slot == kCapturedGradientSets) {
            batch_plan = nullptr;
            return LUMINAV_STATUS_OK;
          }
          std::copy(gradients.begin(), gradients.end(), wb.pinned + slot * count);
          wb.captured.push_back(gradients);
        }
        source = wb.pinned + slot * count;
      } else if (!work->captured && gradients == wb.gradients) {
        source = nullptr;  // the table holds them (a replay may have written it in a captured workspace)
      }
      if (source != nullptr) {
        if (CUresult r = a.cuMemcpyHtoDAsync(work->gradient_table.address, source, count * sizeof(uint64_t), stream);
            r != cuda::drv::CUDA_SUCCESS) {
          return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyHtoDAsync", r));
        }
      }
      if (!capturing) wb.gradients = std::move(gradients);
      return LUMINAV_STATUS_OK;
    }

    // Pass 1 (the finite check; TD-CLM's sums and factors) or pass 2 of every tensor of the call: the
    // batches' launches (Note [triton-aot batches]) and each other tensor's own; per_group: each
    // group's buffers (luminav_step's one).
    int launch_pass(int pass, std::span<const ClmStepBuffers> per_group) {
      const CudaKernels& kernels = state->kernels;
      std::string why;
      for (size_t j = 0; j < plans.size(); ++j) {
        const StepTensor& p = plans[j];
        if (batch_plan != nullptr && batch_plan->in_batch[j]) continue;
        const ClmStepBuffers& b = per_group[p.group];
        const bool ok = pass == 1 ? (p.tdclm ? launch_tdclm_round0(kernels, b, scratch, p.t, p.s, stream, &why)
                                             : launch_finite_check(kernels, b, p.t.t, p.s, stream, &why))
                                  : (p.tdclm ? launch_tdclm_apply(kernels, b, p.t, p.s, stream, &why)
                                             : launch_apply(kernels, b, p.t.t, p.s, stream, &why));
        if (!ok) return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
      }
      if (batch_plan == nullptr) return LUMINAV_STATUS_OK;
      const BatchBuffers tables{work->batch_tables.address, work->gradient_table.address};
      for (const TensorBatch& batch : batch_plan->batches) {
        const ClmStepBuffers& b = per_group[batch.group];
        const bool ok = pass == 1 ? launch_batch_round0(kernels, b, tables, batch, plans, stream, &why)
                                  : launch_batch_apply(kernels, b, tables, batch, plans, stream, &why);
        if (!ok) return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
      }
      return LUMINAV_STATUS_OK;
    }

    // The host's constants for this step (pageable source: the driver stages
    // it before returning, so the block may change with the next call).
    int upload(const core::StepConstants& k) {
      DeviceBlock b{};
      b.k[0] = k.lr, b.k[1] = k.decay_factor, b.k[2] = k.inv_bias_correction1;
      b.k[3] = k.inv_bias_correction2, b.k[4] = k.inv_grad_scale;
      b.step = static_cast<int64_t>(k.step);
      b.words[0] = 0, b.words[1] = kNoBad;
      const CUresult r = driver().api().cuMemcpyHtoDAsync(work->block, &b, sizeof b, stream);
      return r == cuda::drv::CUDA_SUCCESS ? LUMINAV_STATUS_OK
                                          : fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyHtoDAsync", r));
    }

    // The scratch of `workspace`, made room for (DeviceState::kMaxUncapturedWorkspaces; not while
    // capturing: freeing waits for a stream, and the new scratch is refused then anyway).
    static StreamWork& workspace_work(DeviceState& state, const void* workspace, bool capturing) {
      if (!capturing && !state.workspaces.contains(workspace)) {
        auto lru = state.workspaces.end();
        size_t uncaptured = 0;
        for (auto it = state.workspaces.begin(); it != state.workspaces.end(); ++it) {
          if (it->second.captured) continue;
          ++uncaptured;
          if (lru == state.workspaces.end() || it->second.last_used < lru->second.last_used) lru = it;
        }
        if (uncaptured >= DeviceState::kMaxUncapturedWorkspaces) {
          release(lru->second);
          state.workspaces.erase(lru);
        }
      }
      return state.workspaces[workspace];
    }

    // Frees `w`'s buffers once the kernels queued on them have run.
    static void release(StreamWork& w) {
      const cuda::drv::Api& a = driver().api();
      if (w.last_stream != nullptr) a.cuStreamSynchronize(w.last_stream);
      for (DeviceBuffer* b : {&w.partials, &w.group_blocks, &w.row_partials, &w.col_partials, &w.regions,
                              &w.batch_tables, &w.batch_scratch, &w.gradient_table}) {
        if (b->address != 0) a.cuMemFree(b->address);
      }
      if (w.block != 0) a.cuMemFree(w.block);
      if (w.host_words != nullptr) a.cuMemFreeHost(w.host_words);
      if (w.batches.pinned != nullptr) a.cuMemFreeHost(w.batches.pinned);
    }

    static bool allocate(StreamWork* w, std::string* why) {
      const cuda::drv::Api& a = driver().api();
      if (w->block == 0) {
        if (CUresult r = a.cuMemAlloc(&w->block, sizeof(DeviceBlock)); r != cuda::drv::CUDA_SUCCESS) {
          *why = driver().error("cuMemAlloc", r);
          w->block = 0;
          return false;
        }
        void* pinned = nullptr;
        if (CUresult r = a.cuMemAllocHost(&pinned, 64); r != cuda::drv::CUDA_SUCCESS) {
          *why = driver().error("cuMemAllocHost", r);
          return false;
        }
        w->host_words = static_cast<int32_t*>(pinned);
      }
      return true;
    }

    // `buffer` of at least `bytes` (none needed: kept as it is).
    static bool grow(DeviceBuffer* buffer, size_t bytes, CUstream stream, std::string* why) {
      if (buffer->bytes >= bytes) return true;
      const cuda::drv::Api& a = driver().api();
      // Kernels queued on this stream may still read the old buffer; it is freed after them.
      if (buffer->address != 0) {
        a.cuStreamSynchronize(stream);
        a.cuMemFree(buffer->address);
      }
      buffer->address = 0;
      buffer->bytes = 0;
      if (CUresult r = a.cuMemAlloc(&buffer->address, bytes); r != cuda::drv::CUDA_SUCCESS) {
        *why = driver().error("cuMemAlloc", r) + " (" + std::to_string(bytes) + " bytes of step scratch)";
        buffer->address = 0;
        return false;
      }
      buffer->bytes = bytes;
      return true;
    }
  };

  // The host's values of group `gi` into its block: hp64 and, without a device counter, t - 1.
  // A word equal to what was last set there is not set again, unless a graph may have set it since
  // (Note [triton-aot capture]).
  static int set_host_words(Call& call, size_t gi, const AsyncGroup& g, CUdeviceptr block) {
    const bool every_word = call.work->captured;
    std::vector<StreamWork::HostWords>& cache = call.work->group_words;
    if (cache.size() <= gi) cache.resize(gi + 1);
    StreamWork::HostWords& last = cache[gi];
    const double hp64[4] = {g.beta1, g.beta2, g.weight_decay, g.lr_host};
    const float counter = static_cast<float>(g.k.step - 1);
    std::array<uint32_t, kHostWordsPerGroup> words{};
    std::memcpy(words.data(), hp64, sizeof hp64);
    std::memcpy(&words[8], &counter, sizeof counter);
    const size_t count = g.step_counter ? 8 : kHostWordsPerGroup;
    for (size_t w = 0; w < count; ++w) {
      if (!every_word && (last.set >> w & 1u) && last.value[w] == words[w]) continue;
      const CUdeviceptr at = w < 8 ? block + offsetof(GroupBlock, hp64) + 4 * w : block + offsetof(GroupBlock, counter);
      last.set &= ~(1u << w);
      if (const CUresult r = driver().api().cuMemsetD32Async(at, words[w], 1, call.stream); r != cuda::drv::CUDA_SUCCESS) {
        return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemsetD32Async", r));
      }
      last.value[w] = words[w];
      last.set |= 1u << w;
    }
    return LUMINAV_STATUS_OK;
  }

  // The exact nonfinite count of the tensor the finite check named.
  int count_nonfinite(Call& call, const luminav_tensor& t, size_t position, const core::StepConstants& k,
                      luminav_partials* out) {
    const cuda::drv::Api& a = driver().api();
    std::string why;
    if (int code = call.upload(k); code != LUMINAV_STATUS_OK) return code;
    if (!launch_finite_check(call.state->kernels, call.buffers, clm_tensor(t, position), scalars(k), call.stream,
                             &why)) {
      return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    }
    const size_t programs = clm_partials_bytes(call.state->kernels, static_cast<int64_t>(t.num_elements)) /
                            (5 * sizeof(double));
    call.work->host_partials.resize(programs);  // field 0 (field-major): one count per program
    CUresult r = a.cuMemcpyDtoHAsync(call.work->host_partials.data(), call.buffers.partials,
                                     programs * sizeof(double), call.stream);
    if (r == cuda::drv::CUDA_SUCCESS) r = a.cuStreamSynchronize(call.stream);
    if (r != cuda::drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyDtoHAsync", r));
    double count = 0.0;
    for (double c : call.work->host_partials) count += c;
    out->nonfinite_count = static_cast<uint64_t>(count);
    return LUMINAV_STATUS_OK;
  }

  std::mutex devices_mutex_;
  std::map<int, std::unique_ptr<DeviceState>> devices_;
};

}  // namespace
}  // namespace triton_aot

std::unique_ptr<Backend> make_triton_aot_backend() { return std::make_unique<triton_aot::TritonAotBackend>(); }

}  // namespace luminav
