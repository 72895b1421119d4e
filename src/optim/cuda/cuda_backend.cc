// The CUDA backend: per-context module cache, workspaces and kernel launches.
#include "optim/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "optim/core/dtype.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/dispatch/async_workspace.h"
#include "optim/dispatch/sharded_layout.h"
#include "optim/cuda/cuda_driver.h"
#include "optim/cuda/device_pointer_cache.h"
#include "optim/cuda/embedded_files.h"
#include "optim/cuda/launch_params.h"
#include "optim/cuda/launch_script.h"
#include "optim/cuda/step_graph_cache.h"
#include "optim/cuda/step_inputs.h"
#include "optim/cuda/triton_abi.h"
#include "optim/dispatch/backend_error.h"

namespace luminav {
namespace cuda {

const ArtifactStore& active_artifact_store() {
  static const std::unique_ptr<ArtifactStore> from_env = []() -> std::unique_ptr<ArtifactStore> {
    const char* dir = std::getenv("LUMINAV_CUDA_KERNEL_DIR");
    if (dir == nullptr || *dir == '\0') return nullptr;
    return std::make_unique<DirectoryArtifactStore>(dir);
  }();
  return from_env ? *from_env : embedded_cuda_artifacts();
}

namespace {

using drv::CUcontext;
using drv::CUdeviceptr;
using drv::CUfunction;
using drv::CUresult;
using drv::CUstream;

// The parsed manifest of the active store, once per process.
struct LoadedManifest {
  bool ok = false;
  std::string why_not;
  KernelManifest manifest;
};

const LoadedManifest& loaded_manifest() {
  static const LoadedManifest loaded = [] {
    LoadedManifest l;
    const ArtifactStore& store = active_artifact_store();
    std::string json, why;
    if (!store.manifest_json(&json, &why)) {
      l.why_not = "no kernels: " + why;
      return l;
    }
    if (!parse_kernel_manifest(json, &l.manifest, &why)) {
      l.why_not = store.describe() + ": " + why;
      return l;
    }
    if (l.manifest.platform != "cuda") {
      l.why_not = store.describe() + ": manifest platform is " + l.manifest.platform + ", not cuda";
      return l;
    }
    for (const KernelEntry& k : l.manifest.kernels) {
      if (k.signature != kLaunchAbi || k.block_size != kBlockSize) {
        l.why_not = store.describe() + ": kernel " + k.name + " has signature \"" + k.signature +
                    "\" and block size " + std::to_string(k.block_size) + ", this library expects \"" +
                    kLaunchAbi + "\" and " + std::to_string(kBlockSize) + " (stale artifacts?)";
        return l;
      }
    }
    l.ok = true;
    return l;
  }();
  return loaded;
}

// Kernel names: apply/reduce per (param, grad) dtype, as kernels.cu names them.
std::string kernel_name(const char* what, int param_dtype, int grad_dtype) {
  static const char* kNames[] = {"f32", "bf16", "f16"};
  return std::string("luminav_") + what + "_p" + kNames[param_dtype] + "_g" + kNames[grad_dtype];
}

struct Kernel {
  CUfunction function = nullptr;
  int trailing_scratch_ptrs = 0;
};

// Note [per-context state]: modules belong to a context, so they are loaded
// once per context (the primary context of each device) and cached with the
// workspaces used there. The mutex is held for a whole reduce (which ends
// with a stream synchronisation) so that the shared scratch is never used by
// two streams at once.
struct ContextState {
  std::mutex mutex;
  bool ready = false;
  std::string why_not;
  std::string arch;  // the artifact loaded, e.g. "sm_90" or "compute_75 (PTX)"
  drv::CUmodule module = nullptr;
  std::map<std::string, Kernel> kernels;
  CUdeviceptr scratch = 0;  // own tile partials when the caller gives none
  size_t scratch_bytes = 0;
  CUdeviceptr results = 0;  // per-tensor partials, device side
  size_t results_bytes = 0;
  void* host_results = nullptr;  // pinned copy of them
  size_t host_results_bytes = 0;
  StepGraphCache step_graphs;  // Note [cached step graph]
};

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  int device_type() const override { return LUMINAV_DEVICE_CUDA; }

  bool available(std::string* why_not) const override {
    const CudaDriver& d = CudaDriver::instance();
    if (!d.usable()) {
      *why_not = d.why_not();
      return false;
    }
    const LoadedManifest& m = loaded_manifest();
    if (!m.ok) {
      *why_not = m.why_not;
      return false;
    }
    DeviceInfo info;
    std::string why;
    if (!d.device_info(0, &info, &why)) {
      *why_not = why;
      return false;
    }
    // Loading the module on device 0 proves a matching cubin or PTX works.
    ContextState* state = nullptr;
    if (!const_cast<CudaBackend*>(this)->context_state(0, &state, &why)) {
      *why_not = why;
      return false;
    }
    return true;
  }

  // Note [pointer routing]: the driver's memory type decides. Device memory
  // (cuMemAlloc, torch's CUDA tensors) and managed memory (the driver calls
  // it device or unified; kernels read it in place) are served; pinned host
  // memory (cuMemAllocHost) is host memory, and memory the driver never saw
  // (malloc) is an error of the query: both are not served. The query runs
  // in device 0's primary context, since the driver may want a context.
  bool serves_pointer(const void* address, int* device_index) const override {
    if (address == nullptr || !driver().usable()) return false;
    CallScope scope(const_cast<CudaBackend*>(this), 0);
    if (scope.code != LUMINAV_STATUS_OK) {
      take_backend_error();  // a routing question, not a failed call
      return false;
    }
    if (!cuda::query_device_memory(api(), address)) return false;
    if (device_index != nullptr) {
      int ordinal = 0;
      const CUresult r = api().cuPointerGetAttribute(&ordinal, drv::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                     reinterpret_cast<CUdeviceptr>(address));
      *device_index = r == drv::CUDA_SUCCESS && ordinal >= 0 ? ordinal : 0;
    }
    return true;
  }

  std::string detail() const override {
    DeviceInfo info;
    std::string why;
    if (!CudaDriver::instance().device_info(0, &info, &why)) return {};
    return info.arch();
  }

  int load_scalar(const float* address, float* value, const ExecContext& ctx) override {
    return load_scalars(std::span(&address, 1), std::span(value, 1), ctx);
  }

  // One gather kernel per kMaxSlots addresses, one copy, one synchronisation.
  int load_scalars(std::span<const float* const> addresses, std::span<float> values,
                   const ExecContext& ctx) override {
    if (addresses.empty()) return LUMINAV_STATUS_OK;
    CallScope scope(this, ctx.device_index);
    if (scope.code != LUMINAV_STATUS_OK) return scope.code;
    ContextState* state = scope.state;
    std::string why;
    for (size_t j = 0; j < addresses.size(); ++j) {
      if (!is_device_memory(addresses[j])) {
        return fail(LUMINAV_STATUS_INVALID_ARGUMENT,
                    "tensors[" + std::to_string(j) + "]: exp_avg_sq is not CUDA device memory");
      }
    }
    std::lock_guard lock(state->mutex);
    const drv::Api& a = api();
    const size_t bytes = addresses.size() * sizeof(float);
    if (!ensure_device(&state->results, &state->results_bytes, bytes, &why) ||
        !ensure_host_results(*state, bytes, &why)) {
      return fail(LUMINAV_STATUS_OUT_OF_MEMORY, why);
    }
    const Kernel* gather = find_kernel(*state, "luminav_gather_scalars");
    if (gather == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "luminav_gather_scalars missing from the module");
    const CUstream stream = static_cast<CUstream>(ctx.stream);
    for (size_t first = 0; first < addresses.size(); first += kMaxSlots) {
      LaunchParams lp{};
      lp.num_slots = static_cast<uint32_t>(std::min<size_t>(kMaxSlots, addresses.size() - first));
      for (uint32_t i = 0; i < lp.num_slots; ++i) lp.slots[i].exp_avg_sq = const_cast<float*>(addresses[first + i]);
      lp.scalars = reinterpret_cast<float*>(state->results) + first;
      if (int code = launch(*gather, 1, lp, stream); code != LUMINAV_STATUS_OK) return code;
    }
    CUresult r = a.cuMemcpyDtoHAsync(state->host_results, state->results, bytes, stream);
    if (r == drv::CUDA_SUCCESS) r = a.cuStreamSynchronize(stream);
    if (r != drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyDtoHAsync", r));
    std::memcpy(values.data(), state->host_results, bytes);
    return LUMINAV_STATUS_OK;
  }

  int reduce(const core::StepConstants& k, std::span<const luminav_tensor> tensors, int round,
             std::span<const core::TensorGlobals> globals, std::span<luminav_partials> out,
             const ExecContext& ctx) override {
    std::fill(out.begin(), out.end(), luminav_partials{});
    if (int code = check_supported(k, tensors); code != LUMINAV_STATUS_OK) return code;
    const uint32_t fields = reduce_fields(k, round);
    if (fields == 0 || tensors.empty()) return LUMINAV_STATUS_OK;

    CallScope scope(this, ctx.device_index);
    if (scope.code != LUMINAV_STATUS_OK) return scope.code;
    ContextState* state = scope.state;
    std::string why;
    if (int code = check_device_pointers(tensors); code != LUMINAV_STATUS_OK) return code;
    std::lock_guard lock(state->mutex);
    const drv::Api& a = api();
    const CUstream stream = static_cast<CUstream>(ctx.stream);

    // Tile partials: the caller's scratch when it is device memory, else ours.
    size_t max_tiles = 0;
    for (const luminav_tensor& t : tensors) max_tiles += core::reduction_tiles(t.num_elements);
    const size_t scratch_needed = max_tiles * kTilePartialStride;
    CUdeviceptr scratch = 0;
    if (ctx.scratch != nullptr && ctx.scratch_bytes >= scratch_needed) {
      if (!is_device_memory(ctx.scratch)) {
        return fail(LUMINAV_STATUS_INVALID_ARGUMENT, "scratch is not CUDA device memory");
      }
      scratch = reinterpret_cast<CUdeviceptr>(ctx.scratch);
    } else {
      if (!ensure_device(&state->scratch, &state->scratch_bytes, scratch_needed, &why)) {
        return fail(LUMINAV_STATUS_OUT_OF_MEMORY, why);
      }
      scratch = state->scratch;
    }
    const size_t results_needed = tensors.size() * sizeof(luminav_partials);
    if (!ensure_device(&state->results, &state->results_bytes, results_needed, &why) ||
        !ensure_host_results(*state, results_needed, &why)) {
      return fail(LUMINAV_STATUS_OUT_OF_MEMORY, why);
    }

    LaunchParams lp{};
    lp.k = k;
    lp.reduce_fields = fields;
    lp.tile_elems = kReduceTileElems;
    lp.tile_partials = reinterpret_cast<unsigned char*>(scratch);
    // Tensors without tiles get no combine block: their results stay zero.
    CUresult r = a.cuMemsetD8Async(state->results, 0, results_needed, stream);
    if (r != drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemsetD8Async", r));
    const Kernel* combine = find_kernel(*state, "luminav_combine_partials");
    if (combine == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "luminav_combine_partials missing from the module");
    // Batches of tensors with the same dtypes, in order (Note [tiles and launches]).
    int code = for_each_batch(tensors, globals, kReduceTileElems, lp, [&](size_t first, const LaunchParams& batch) {
      const Kernel* kernel = find_kernel(*state, kernel_name("reduce", tensors[first].param_dtype,
                                                              tensors[first].grad_dtype));
      if (kernel == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "reduce kernel missing from the module");
      LaunchParams p = batch;
      p.tensor_partials = reinterpret_cast<luminav_partials*>(state->results) + first;
      if (int c = launch(*kernel, p.first_tile[p.num_slots], p, stream); c != LUMINAV_STATUS_OK) return c;
      return launch(*combine, p.num_slots, p, stream);
    });
    if (code != LUMINAV_STATUS_OK) return code;
    r = a.cuMemcpyDtoHAsync(state->host_results, state->results, results_needed, stream);
    if (r != drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyDtoHAsync", r));
    r = a.cuStreamSynchronize(stream);
    if (r != drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuStreamSynchronize", r));
    std::memcpy(out.data(), state->host_results, results_needed);
    return LUMINAV_STATUS_OK;
  }

  // The asynchronous step's workspace, carved (dispatch/async_workspace.h).
  struct AsyncStep {
    dispatch::AsyncWorkspaceLayout layout;
    unsigned char* base;
    dispatch::AsyncStepWords* words;
    core::StepConstants* constants;
    core::TensorGlobals* globals;
    luminav_partials* tensor_partials;
    unsigned char* tile_partials;
    uint32_t* slot_counters;
  };
  static AsyncStep async_step(std::span<const AsyncGroup> groups, void* scratch) {
    AsyncStep st{};
    st.layout = dispatch::async_workspace_layout(groups);
    st.base = static_cast<unsigned char*>(scratch);
    st.words = reinterpret_cast<dispatch::AsyncStepWords*>(st.base + st.layout.words);
    st.constants = reinterpret_cast<core::StepConstants*>(st.base + st.layout.constants);
    st.globals = reinterpret_cast<core::TensorGlobals*>(st.base + st.layout.globals);
    st.tensor_partials = reinterpret_cast<luminav_partials*>(st.base + st.layout.tensor_partials);
    st.tile_partials = st.base + st.layout.tile_partials;
    st.slot_counters = reinterpret_cast<uint32_t*>(st.base + st.layout.slot_counters);
    return st;
  }

  bool supports_async() const override { return true; }

  // Note [device-resident step]: prepare (constants, words) -> per group and
  // batch: reduce, its last block finalizing each slot on the device (per
  // round; Note [last block finalizes]) -> per group and batch:
  // apply, which writes nothing when the step is blocked -> commit (verdict,
  // step counters) -> an asynchronous copy of the status word. No host
  // synchronisation; every pointer lives in the caller's workspace or
  // tensors, so the sequence can be captured in a CUDA graph (the caller's,
  // or our own: Note [cached step graph]).
  int step_async(std::span<const AsyncGroup> groups, const luminav_async& async,
                 const ExecContext& ctx) override {
    static const bool trace = std::getenv("LUMINAV_TRACE_HOST") != nullptr;
    auto t_start = std::chrono::steady_clock::now();
    auto mark = [&](const char* what) {
      if (!trace) return;
      const auto now = std::chrono::steady_clock::now();
      std::fprintf(stderr, "luminav: step_async %s %.1f us\n", what,
                   std::chrono::duration<double, std::micro>(now - t_start).count());
      t_start = now;
    };
    CallScope scope(this, ctx.device_index);
    if (scope.code != LUMINAV_STATUS_OK) return scope.code;
    ContextState* state = scope.state;
    mark("scope");
    const auto trace_counters = [&] {
      if (!trace) return;
      const StepGraphCache::Counters c = state->step_graphs.counters();
      std::fprintf(stderr, "luminav: step graphs: eager %llu built %llu replayed %llu nodes updated %llu unchanged %llu\n",
                   static_cast<unsigned long long>(c.eager), static_cast<unsigned long long>(c.built),
                   static_cast<unsigned long long>(c.replayed), static_cast<unsigned long long>(c.nodes_updated),
                   static_cast<unsigned long long>(c.unchanged));
    };
    // A step seen before is its graph launched again (Note [a step seen before]).
    thread_local std::vector<unsigned char> inputs;  // reused: no allocation per step
    step_inputs(groups, async, ctx, &inputs);
    std::string why;
    bool launched = false;
    if (!state->step_graphs.submit_again(inputs, static_cast<CUstream>(ctx.stream), &launched, &why)) {
      return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    }
    if (launched) {
      mark("issued again");
      trace_counters();
      return LUMINAV_STATUS_OK;
    }
    // Recorded first, issued at the end (Note [cached step graph]).
    LaunchScript script;
    const LaunchTarget target(static_cast<CUstream>(ctx.stream), &script);
    const AsyncStep st = async_step(groups, ctx.scratch);
    if (int code = launch_prepare(*state, groups, async, st, target); code != LUMINAV_STATUS_OK) return code;
    // Pass 1 of every group before any pass 2 (the finite check covers the call).
    uint32_t dense = 0;
    size_t factor_offset = st.layout.factors;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      const int rounds = core::reduction_rounds(g.k);
      for (int round = 0; round < rounds; ++round) {
        if (int code = launch_reduce(*state, g, gi, dense, round, st, true, target); code != LUMINAV_STATUS_OK) {
          return code;
        }
        if (round == 0 && g.k.tdclm) {
          if (int c = launch_factors(*state, g, dense, st.constants + gi, st.words, st.base, st.layout,
                                     &factor_offset, target);
              c != LUMINAV_STATUS_OK) {
            return c;
          }
        }
      }
      dense += static_cast<uint32_t>(g.tensors.size());
    }
    if (int code = launch_apply_and_commit(*state, groups, async, st, target); code != LUMINAV_STATUS_OK) return code;
    mark("recorded");
    // A script equal to one issued before holds only pointers checked then.
    if (!state->step_graphs.submitted_before(script)) {
      if (int code = check_async_pointers(groups, async, ctx.scratch); code != LUMINAV_STATUS_OK) return code;
    }
    mark("pointer checks");
    if (!state->step_graphs.submit(script, inputs, target.stream, &why)) return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    mark("issued");
    trace_counters();
    return LUMINAV_STATUS_OK;
  }

  // Note [sharded phases on the device]: luminav_step_groups_sharded's
  // phases (luminav_groups.h) as the asynchronous step's kernels, split at
  // the exchanges: phase 0 prepares; each phase p < P reduces round p
  // without the last-block finalize, combines each tensor's tiles in order
  // and packs the sums into the exchange (luminav_sharded_exchange, pack);
  // the phase after an exchange folds the reduced records into the globals
  // on the device (fold: the finite verdict of every rank's shards, the
  // found_inf of every rank); phase P applies and commits. Nothing waits for
  // the device; the caller's all-reduce is ordered on the same stream.
  int step_sharded(std::span<const AsyncGroup> groups, const dispatch::ShardedLayout& layout, int phase,
                   int exchanges, const luminav_async& async, double* exchange, const ExecContext& ctx) override {
    CallScope scope(this, ctx.device_index);
    if (scope.code != LUMINAV_STATUS_OK) return scope.code;
    ContextState* state = scope.state;
    if (int code = check_async_pointers(groups, async, ctx.scratch); code != LUMINAV_STATUS_OK) return code;
    if (!is_device_memory(exchange)) {
      return fail(LUMINAV_STATUS_INVALID_ARGUMENT, "exchange is not CUDA device memory");
    }
    const Kernel* pack_fold = find_kernel(*state, "luminav_sharded_exchange");
    const Kernel* combine = find_kernel(*state, "luminav_combine_partials");
    if (pack_fold == nullptr || combine == nullptr) {
      return fail(LUMINAV_STATUS_INTERNAL, "sharded step kernels missing from the module");
    }
    const CUstream stream = static_cast<CUstream>(ctx.stream);
    const AsyncStep st = async_step(groups, ctx.scratch);
    auto exchange_launch = [&](uint32_t mode, uint32_t round, const LaunchParams* batch) {
      LaunchParams p = batch ? *batch : LaunchParams{};
      p.words = st.words;
      p.exchange = exchange;
      p.exchange_mode = mode;
      p.round = round;
      return launch(*pack_fold, 1, p, stream);
    };
    if (phase == 0) {
      if (int code = launch_prepare(*state, groups, async, st, stream); code != LUMINAV_STATUS_OK) return code;
    } else {
      // Fold the reduced records of round phase - 1 (every group that has that round).
      const uint32_t round = static_cast<uint32_t>(phase - 1);
      uint32_t dense = 0;
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const AsyncGroup& g = groups[gi];
        if (static_cast<int>(round) < core::reduction_rounds(g.k)) {
          std::vector<core::TensorGlobals> initial(g.tensors.size(), core::initial_globals(g.k, 0.0f));
          LaunchParams lp{};
          lp.k = g.k;
          lp.k_device = st.constants + gi;
          lp.tile_elems = kReduceTileElems;
          int code = for_each_batch(g.tensors, initial, kReduceTileElems, lp, [&](size_t first, const LaunchParams& b) {
            LaunchParams p = b;
            set_positions(p, g, first);
            p.globals_base = dense + static_cast<uint32_t>(first);
            p.finalized = st.globals;
            return exchange_launch(kExchangeFold, round, &p);
          });
          if (code != LUMINAV_STATUS_OK) return code;
        }
        dense += static_cast<uint32_t>(g.tensors.size());
      }
      if (round == 0) {  // the column factors from the reduced column sums, rho and R
        if (int code = sharded_factors(*state, groups, st, layout, kExchangeFold, exchange, stream);
            code != LUMINAV_STATUS_OK) {
          return code;
        }
      }
    }
    if (phase == exchanges) return launch_apply_and_commit(*state, groups, async, st, stream);

    // Round `phase`: reduce, combine, pack into the zeroed exchange.
    const CUresult r = api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(exchange), 0,
                                             layout.exchange_doubles * sizeof(double), stream);
    if (r != drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemsetD8Async", r));
    if (phase == 0) {  // the header: found_inf (or an earlier failure) on this rank
      if (int code = exchange_launch(kExchangeHeader, 0, nullptr); code != LUMINAV_STATUS_OK) return code;
    }
    uint32_t dense = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      if (phase < core::reduction_rounds(g.k)) {
        if (int code = launch_reduce(*state, g, gi, dense, phase, st, false, stream, [&](const LaunchParams& p) {
              if (int c = launch(*combine, p.num_slots, p, stream); c != LUMINAV_STATUS_OK) return c;
              return exchange_launch(kExchangePack, static_cast<uint32_t>(phase), &p);
            });
            code != LUMINAV_STATUS_OK) {
          return code;
        }
      }
      dense += static_cast<uint32_t>(g.tensors.size());
    }
    if (phase == 0) {  // after every record is packed: the row-factor sums and column sums
      return sharded_factors(*state, groups, st, layout, kExchangePack, exchange, stream);
    }
    return LUMINAV_STATUS_OK;
  }

  // The factor kernels of every TD-CLM group of a sharded step in `mode`,
  // walking the workspace's factor region in call order as the unsharded step does.
  int sharded_factors(ContextState& state, std::span<const AsyncGroup> groups, const AsyncStep& st,
                      const dispatch::ShardedLayout& layout, uint32_t mode, double* exchange, CUstream stream) {
    uint32_t dense = 0;
    size_t offset = st.layout.factors;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      if (g.k.tdclm) {
        if (int c = launch_factors(state, g, dense, st.constants + gi, st.words, st.base, st.layout, &offset, stream,
                                   &layout, mode, exchange);
            c != LUMINAV_STATUS_OK) {
          return c;
        }
      }
      dense += static_cast<uint32_t>(g.tensors.size());
    }
    return LUMINAV_STATUS_OK;
  }

  int apply(const core::StepConstants& k, std::span<const luminav_tensor> tensors,
            std::span<const core::TensorGlobals> globals, const ExecContext& ctx) override {
    if (tensors.empty()) return LUMINAV_STATUS_OK;
    if (int code = check_supported(k, tensors); code != LUMINAV_STATUS_OK) return code;
    CallScope scope(this, ctx.device_index);
    if (scope.code != LUMINAV_STATUS_OK) return scope.code;
    ContextState* state = scope.state;
    std::string why;
    if (int code = check_device_pointers(tensors); code != LUMINAV_STATUS_OK) return code;
    const CUstream stream = static_cast<CUstream>(ctx.stream);
    LaunchParams lp{};
    lp.k = k;
    lp.tile_elems = kApplyTileElems;
    return for_each_batch(tensors, globals, kApplyTileElems, lp, [&](size_t first, const LaunchParams& p) {
      const Kernel* kernel = find_kernel(*state, kernel_name("apply", tensors[first].param_dtype,
                                                              tensors[first].grad_dtype));
      if (kernel == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "apply kernel missing from the module");
      return launch(*kernel, p.first_tile[p.num_slots], p, stream);
    });
  }

 private:
  static const CudaDriver& driver() { return CudaDriver::instance(); }
  static const drv::Api& api() { return driver().api(); }

  static int fail(int code, std::string message) {
    set_backend_error(std::move(message));
    return code;
  }

  // What every entry point starts with: the device's module and workspaces
  // (loaded on first use) and its primary context current for the call's
  // scope. `code` is not OK when either failed (the message is set).
  struct CallScope {
    ContextState* state = nullptr;
    int code = LUMINAV_STATUS_OK;
    bool pushed = false;
    CallScope(CudaBackend* backend, int ordinal) {
      std::string why;
      CUcontext context = nullptr;
      if (!backend->context_state(ordinal, &state, &why)) {
        code = fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE, why);
      } else if (!backend->primary_context(ordinal, &context, &why)) {
        code = fail(LUMINAV_STATUS_DRIVER_ERROR, why);
      } else if (const CUresult r = api().cuCtxPushCurrent(context); r != drv::CUDA_SUCCESS) {
        code = fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuCtxPushCurrent", r));
      } else {
        pushed = true;
      }
    }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    ~CallScope() {
      if (pushed) {
        CUcontext popped = nullptr;
        api().cuCtxPopCurrent(&popped);
      }
    }
  };

  bool primary_context(int ordinal, CUcontext* context, std::string* why) {
    std::lock_guard lock(contexts_mutex_);
    auto it = primary_.find(ordinal);
    if (it != primary_.end()) {
      *context = it->second;
      return true;
    }
    const drv::Api& a = api();
    drv::CUdevice device = 0;
    CUresult r = a.cuDeviceGet(&device, ordinal);
    if (r != drv::CUDA_SUCCESS) {
      *why = driver().error("cuDeviceGet", r) + " (device_index " + std::to_string(ordinal) + ")";
      return false;
    }
    r = a.cuDevicePrimaryCtxRetain(context, device);
    if (r != drv::CUDA_SUCCESS) {
      *why = driver().error("cuDevicePrimaryCtxRetain", r);
      return false;
    }
    primary_[ordinal] = *context;  // retained for the life of the process
    return true;
  }

  // The module and workspaces of device `ordinal`'s primary context, loaded
  // on first use (Note [per-context state]).
  bool context_state(int ordinal, ContextState** out, std::string* why) {
    const CudaDriver& d = driver();
    if (!d.usable()) {
      *why = d.why_not();
      return false;
    }
    const LoadedManifest& m = loaded_manifest();
    if (!m.ok) {
      *why = m.why_not;
      return false;
    }
    CUcontext context = nullptr;
    if (!primary_context(ordinal, &context, why)) return false;
    ContextState* state = nullptr;
    {
      std::lock_guard lock(contexts_mutex_);
      auto& slot = states_[context];
      if (!slot) slot = std::make_unique<ContextState>();
      state = slot.get();
    }
    std::lock_guard lock(state->mutex);
    if (!state->ready && state->why_not.empty()) load_module(ordinal, context, *state);
    if (!state->ready) {
      *why = state->why_not;
      return false;
    }
    *out = state;
    return true;
  }

  // Chooses the cubin for the device (PTX as the fallback), verifies it and
  // loads it into `context`; the reasons of every failed candidate are kept.
  void load_module(int ordinal, CUcontext context, ContextState& state) {
    const drv::Api& a = api();
    DeviceInfo info;
    std::string why;
    if (!driver().device_info(ordinal, &info, &why)) {
      state.why_not = why;
      return;
    }
    state.why_not = driver_older_than(driver().driver_version(), kMinDriverVersion,
                                      "the kernels' parameter block of up to 32,764 bytes");
    if (!state.why_not.empty()) return;
    const KernelManifest& manifest = loaded_manifest().manifest;
    const ArtifactStore& store = active_artifact_store();
    const int cc = info.cc_major * 10 + info.cc_minor;
    const auto candidates = artifact_candidates(manifest, cc);
    if (candidates.empty()) {
      state.why_not = store.describe() + " has no cubin for " + info.arch() + " (" + info.name +
                      ") and no PTX it can compile";
      return;
    }
    if (a.cuCtxPushCurrent(context) != drv::CUDA_SUCCESS) {
      state.why_not = "cannot make the primary context current";
      return;
    }
    std::string reasons;
    for (const ArtifactEntry* entry : candidates) {
      std::vector<uint8_t> bytes;
      if (!store.read(entry->file, &bytes, &why) || !verify_artifact(*entry, bytes, &why)) {
        reasons += (reasons.empty() ? "" : "; ") + why;
        continue;
      }
      if (entry->kind == ArtifactKind::kPtx) bytes.push_back(0);  // the JIT reads a C string
      char log[4096] = {};
      drv::CUjit_option options[] = {drv::CU_JIT_ERROR_LOG_BUFFER, drv::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
      drv::CUmodule module = nullptr;
      const CUresult r = a.cuModuleLoadDataEx(&module, bytes.data(), 2, options, values);
      if (r != drv::CUDA_SUCCESS) {
        reasons += (reasons.empty() ? "" : "; ") + entry->file + ": " + driver().error("cuModuleLoadDataEx", r) +
                   (log[0] ? std::string(" (") + log + ")" : std::string());
        continue;
      }
      bool all_found = true;
      for (const KernelEntry& k : manifest.kernels) {
        CUfunction f = nullptr;
        const CUresult rf = a.cuModuleGetFunction(&f, module, k.name.c_str());
        if (rf != drv::CUDA_SUCCESS) {
          reasons += (reasons.empty() ? "" : "; ") + entry->file + ": " +
                     driver().error("cuModuleGetFunction(" + k.name + ")", rf);
          all_found = false;
          break;
        }
        state.kernels[k.name] = Kernel{f, k.num_trailing_scratch_ptrs};
      }
      if (!all_found) {
        state.kernels.clear();
        a.cuModuleUnload(module);
        continue;
      }
      state.module = module;
      state.arch = entry->kind == ArtifactKind::kPtx ? entry->arch + " (PTX)" : entry->arch;
      state.ready = true;
      break;
    }
    CUcontext popped = nullptr;
    a.cuCtxPopCurrent(&popped);
    if (!state.ready) state.why_not = "no usable kernel image for " + info.arch() + ": " + reasons;
    // Which image runs (and why a better one did not) matters when a
    // directory of artifacts replaces the embedded ones: say it on request.
    if (const char* log = std::getenv("LUMINAV_LOG"); log != nullptr && *log && std::strcmp(log, "0") != 0) {
      std::fprintf(stderr, "luminav: cuda: device %d (%s, %s): %s%s%s\n", ordinal, info.name.c_str(),
                   info.arch().c_str(),
                   state.ready ? ("loaded " + state.arch + " from " + store.describe()).c_str()
                               : state.why_not.c_str(),
                   state.ready && !reasons.empty() ? "; skipped: " : "",
                   state.ready ? reasons.c_str() : "");
    }
  }

  static const Kernel* find_kernel(const ContextState& state, const std::string& name) {
    auto it = state.kernels.find(name);
    return it == state.kernels.end() ? nullptr : &it->second;
  }

  static bool ensure_device(CUdeviceptr* ptr, size_t* bytes, size_t needed, std::string* why) {
    if (*bytes >= needed && *ptr != 0) return true;
    const drv::Api& a = api();
    if (*ptr != 0) a.cuMemFree(*ptr);  // stream-ordered users were synchronised (reduce ends with a sync)
    *ptr = 0;
    *bytes = 0;
    const size_t size = std::max<size_t>(needed, 4096);
    const CUresult r = a.cuMemAlloc(ptr, size);
    if (r != drv::CUDA_SUCCESS) {
      *why = driver().error("cuMemAlloc", r) + " (" + std::to_string(size) + " bytes of workspace)";
      *ptr = 0;
      return false;
    }
    *bytes = size;
    return true;
  }

  static bool ensure_host_results(ContextState& state, size_t needed, std::string* why) {
    if (state.host_results_bytes >= needed) return true;
    const drv::Api& a = api();
    if (state.host_results != nullptr) a.cuMemFreeHost(state.host_results);
    state.host_results = nullptr;
    state.host_results_bytes = 0;
    const size_t size = std::max<size_t>(needed, 4096);
    const CUresult r = a.cuMemAllocHost(&state.host_results, size);
    if (r != drv::CUDA_SUCCESS) {
      *why = driver().error("cuMemAllocHost", r);
      return false;
    }
    state.host_results_bytes = size;
    return true;
  }

  // Note [device pointer cache] (device_pointer_cache.h).
  static bool is_device_memory(const void* p) { return cuda::is_device_memory(api(), p); }

  // A host pointer handed to a kernel is an illegal address that poisons the
  // context, so each tensor's parameter and gradient are checked (one cheap
  // driver query each; the remaining buffers are the caller's contract).
  static int check_device_pointers(std::span<const luminav_tensor> tensors) {
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (!is_device_memory(tensors[j].param) || !is_device_memory(tensors[j].grad)) {
        return fail(LUMINAV_STATUS_INVALID_ARGUMENT,
                    "tensors[" + std::to_string(j) +
                        "]: param/grad are not CUDA device memory (device_type is CUDA)");
      }
    }
    return LUMINAV_STATUS_OK;
  }

  // The asynchronous step's small device buffers: a host pointer there would
  // poison the context like a host tensor would.
  // Every tensor's buffers, the status word, the scale and found_inf, and the workspace in device memory.
  int check_async_pointers(std::span<const AsyncGroup> groups, const luminav_async& async, void* scratch) {
    for (const AsyncGroup& g : groups) {
      if (int code = check_device_pointers(g.tensors); code != LUMINAV_STATUS_OK) return code;
    }
    return check_small_device_pointers(groups, async, scratch);
  }

  static int check_small_device_pointers(std::span<const AsyncGroup> groups, const luminav_async& async,
                                         const void* workspace) {
    struct Named {
      const void* p;
      const char* what;
    };
    const Named fixed[] = {{async.status, "async.status"}, {async.grad_scale, "async.grad_scale"},
                           {async.found_inf, "async.found_inf"}, {workspace, "the workspace (options.scratch)"}};
    for (const Named& n : fixed) {
      if (n.p != nullptr && !is_device_memory(n.p)) {
        return fail(LUMINAV_STATUS_INVALID_ARGUMENT, std::string(n.what) + " is not CUDA device memory");
      }
    }
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      if ((g.step_counter != nullptr && !is_device_memory(g.step_counter)) ||
          (g.lr != nullptr && !is_device_memory(g.lr))) {
        return fail(LUMINAV_STATUS_INVALID_ARGUMENT,
                    "group " + std::to_string(gi) + ": step_counter/lr are not CUDA device memory");
      }
    }
    return LUMINAV_STATUS_OK;
  }

  // Not yet in these kernels: TD-CLM's per-row and factored second moments
  // (td_factor factored/row).
  static int check_supported(const core::StepConstants& k, std::span<const luminav_tensor> tensors) {
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (k.tdclm && tensors[j].td_factor != LUMINAV_TD_TENSOR) {
        return fail(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                    "tensors[" + std::to_string(j) + "]: td_factor " +
                        (tensors[j].td_factor == LUMINAV_TD_ROW ? "row" : "factored") +
                        " runs on cuda in the asynchronous step only (luminav_step_groups); "
                        "this entry point supports td_factor tensor");
      }
    }
    return LUMINAV_STATUS_OK;
  }

  // Slot i of a batch starting at the group's tensor `first`: its position in the call.
  static void set_positions(LaunchParams& p, const AsyncGroup& g, size_t first) {
    for (uint32_t i = 0; i < p.num_slots; ++i) {
      p.slots[i].position = g.positions[first + i];
      p.slots[i].moment_kind = static_cast<uint32_t>(core::moment_layout(g.k.tdclm, g.tensors[first + i]).kind);
    }
  }

  // The factor kernels of a group's TD-CLM row/factored tensors (Note
  // [factors on the device]): batches of kMaxFactorSlots, each a sums launch
  // per gradient dtype and one update launch. `offset` walks the workspace's
  // factor region in call order.
  // Every group's constants on the device and the step's words reset.
  int launch_prepare(ContextState& state, std::span<const AsyncGroup> groups, const luminav_async& async,
                     const AsyncStep& st, LaunchTarget stream) {
    const Kernel* prepare = find_kernel(state, "luminav_prepare_step");
    if (prepare == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "luminav_prepare_step missing from the module");
    for (size_t first = 0; first < groups.size(); first += kMaxPrepareGroups) {
      PrepareParams pp{};
      pp.k_out = st.constants + first;
      pp.words = st.words;
      pp.status = async.status;
      pp.found_inf = async.found_inf;
      pp.grad_scale = async.grad_scale;
      pp.reset_words = first == 0;
      pp.num_groups = static_cast<uint32_t>(std::min<size_t>(kMaxPrepareGroups, groups.size() - first));
      for (uint32_t i = 0; i < pp.num_groups; ++i) {
        const AsyncGroup& g = groups[first + i];
        PrepareGroup& out = pp.groups[i];
        out.k = g.k;
        out.step_counter = g.step_counter;
        out.lr = g.lr;
        out.lr_dtype = g.lr_dtype;
        out.lr_host = g.lr_host;
        out.beta1 = g.beta1;
        out.beta2 = g.beta2;
        out.weight_decay = g.weight_decay;
      }
      if (int code = launch_struct(*prepare, 1, &pp, stream); code != LUMINAV_STATUS_OK) return code;
    }
    return LUMINAV_STATUS_OK;
  }

  // One reduction round of a group, batch by batch. `finalize`: each
  // slot's last block folds its sums on the device (the unsharded step);
  // else `after(batch)` runs after each batch's reduction (the sharded
  // step's combine and pack).
  template <class After = int (*)(const LaunchParams&)>
  int launch_reduce(ContextState& state, const AsyncGroup& g, size_t gi, uint32_t dense, int round,
                    const AsyncStep& st, bool finalize, LaunchTarget stream, After after = nullptr) {
    uint32_t fields = reduce_fields(g.k, round);
    // The unsharded step's factor sums read and check row/factored gradients (Note [factor tiles]).
    if (finalize && round == 0 && g.k.tdclm) fields |= kReduceFactorGrads;
    std::vector<core::TensorGlobals> initial(g.tensors.size(), core::initial_globals(g.k, 0.0f));
    LaunchParams lp{};
    lp.k = g.k;
    lp.k_device = st.constants + gi;
    lp.words = st.words;
    lp.reduce_fields = fields;
    lp.round = static_cast<uint32_t>(round);
    lp.tile_elems = kReduceTileElems;
    lp.tile_partials = st.tile_partials;
    return for_each_batch(g.tensors, initial, kReduceTileElems, lp, [&](size_t first, const LaunchParams& batch) {
      const Kernel* kernel = find_kernel(state, kernel_name("reduce", g.tensors[first].param_dtype,
                                                            g.tensors[first].grad_dtype));
      if (kernel == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "reduce kernel missing from the module");
      LaunchParams p = batch;
      set_positions(p, g, first);
      p.globals_base = dense + static_cast<uint32_t>(first);
      // Round 0 reads the initial globals of the slots; later rounds the device's.
      p.globals = round == 0 ? nullptr : st.globals;
      p.finalized = st.globals;
      p.slot_counters = finalize ? st.slot_counters : nullptr;
      // Round 1 reads the factors round 0's factor kernels formed (TD-CLM).
      p.factor_views = reinterpret_cast<const dispatch::FactorView*>(st.base + st.layout.factor_views);
      p.tensor_partials = st.tensor_partials + dense + first;
      if (int c = launch(*kernel, p.first_tile[p.num_slots], p, stream); c != LUMINAV_STATUS_OK) return c;
      if constexpr (!std::is_same_v<After, int (*)(const LaunchParams&)>) return static_cast<int>(after(p));
      return static_cast<int>(LUMINAV_STATUS_OK);
    });
  }

  // Pass 2 of every group (nothing written when the step is blocked), the
  // verdict and step counters, and the asynchronous copy of the status word.
  int launch_apply_and_commit(ContextState& state, std::span<const AsyncGroup> groups, const luminav_async& async,
                              const AsyncStep& st, LaunchTarget stream) {
    const Kernel* commit = find_kernel(state, "luminav_commit_step");
    if (commit == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "luminav_commit_step missing from the module");
    uint32_t dense = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      const bool device_globals = core::reduction_rounds(g.k) > 0;
      std::vector<core::TensorGlobals> initial(g.tensors.size(), core::initial_globals(g.k, 0.0f));
      LaunchParams lp{};
      lp.k = g.k;
      lp.k_device = st.constants + gi;
      lp.words = st.words;
      lp.tile_elems = kApplyTileElems;
      int code = for_each_batch(g.tensors, initial, kApplyTileElems, lp, [&](size_t first, const LaunchParams& batch) {
        const Kernel* kernel = find_kernel(state, kernel_name("apply", g.tensors[first].param_dtype,
                                                              g.tensors[first].grad_dtype));
        if (kernel == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "apply kernel missing from the module");
        LaunchParams p = batch;
        set_positions(p, g, first);
        p.globals = device_globals ? st.globals : nullptr;
        p.factor_views = reinterpret_cast<const dispatch::FactorView*>(st.base + st.layout.factor_views);
        p.globals_base = dense + static_cast<uint32_t>(first);
        return launch(*kernel, p.first_tile[p.num_slots], p, stream);
      });
      if (code != LUMINAV_STATUS_OK) return code;
      dense += static_cast<uint32_t>(g.tensors.size());
    }
    std::vector<float*> counters;
    for (const AsyncGroup& g : groups) {
      if (g.step_counter != nullptr) counters.push_back(g.step_counter);
    }
    size_t next = 0;
    do {
      CommitParams cp{};
      cp.words = st.words;
      cp.status = async.status;
      cp.found_inf = async.found_inf;
      cp.skip_nonfinite = async.skip_nonfinite ? 1u : 0u;
      cp.decide = next == 0;
      cp.num_counters = static_cast<uint32_t>(std::min<size_t>(kMaxCommitCounters, counters.size() - next));
      for (uint32_t i = 0; i < cp.num_counters; ++i) cp.step_counters[i] = counters[next + i];
      next += cp.num_counters;
      if (int code = launch_struct(*commit, 1, &cp, stream); code != LUMINAV_STATUS_OK) return code;
    } while (next < counters.size());
    if (async.host_status != nullptr) {
      if (stream.script != nullptr) {
        stream.script->add_copy_to_host(async.host_status, async.status, sizeof(luminav_step_status));
        return LUMINAV_STATUS_OK;
      }
      const CUresult r = api().cuMemcpyDtoHAsync(async.host_status, reinterpret_cast<CUdeviceptr>(async.status),
                                                 sizeof(luminav_step_status), stream.stream);
      if (r != drv::CUDA_SUCCESS) return fail(LUMINAV_STATUS_DRIVER_ERROR, driver().error("cuMemcpyDtoHAsync", r));
    }
    return LUMINAV_STATUS_OK;
  }

  // `sharded` (the sharded step): kExchangePack runs the sums and packs the
  // shard's factor sums into the exchange, kExchangeFold finishes the
  // column factors from the reduced exchange (Note [sharded phases on the device]).
  int launch_factors(ContextState& state, const AsyncGroup& g, uint32_t dense, const core::StepConstants* k,
                     dispatch::AsyncStepWords* words, unsigned char* base,
                     const dispatch::AsyncWorkspaceLayout& layout, size_t* offset, LaunchTarget stream,
                     const dispatch::ShardedLayout* sharded = nullptr, uint32_t mode = 0, double* exchange = nullptr) {
    const Kernel* rows_kernel = find_kernel(state, "luminav_factor_rows");
    const Kernel* cols_kernel = find_kernel(state, "luminav_factor_cols");
    const Kernel* sharded_kernel = find_kernel(state, "luminav_sharded_factors");
    if (rows_kernel == nullptr || cols_kernel == nullptr || sharded_kernel == nullptr) {
      return fail(LUMINAV_STATUS_INTERNAL, "factor kernels missing from the module");
    }
    auto* views = reinterpret_cast<dispatch::FactorView*>(base + layout.factor_views);
    auto* globals = reinterpret_cast<core::TensorGlobals*>(base + layout.globals);
    FactorParams fp{};
    int grad_dtype = -1;
    // Each kernel's grid: its blocks per slot, as the prefix sum in first_block.
    auto grid = [&](auto blocks_of) {
      for (uint32_t i = 0; i < fp.num_slots; ++i) {
        fp.first_block[i + 1] = fp.first_block[i] + static_cast<uint32_t>(blocks_of(fp.slots[i]));
      }
      return fp.first_block[fp.num_slots];
    };
    auto flush = [&]() -> int {
      if (fp.num_slots == 0) return LUMINAV_STATUS_OK;
      static const char* kNames[] = {"f32", "bf16", "f16"};
      const Kernel* sums = find_kernel(state, std::string("luminav_factor_sums_g") + kNames[grad_dtype]);
      if (sums == nullptr) return fail(LUMINAV_STATUS_INTERNAL, "luminav_factor_sums missing from the module");
      fp.exchange = exchange;
      fp.mode = mode;
      fp.finite_check = sharded == nullptr ? 1u : 0u;  // the sharded step's verdict comes from the fold
      fp.first_block[0] = 0;
      if (mode != kExchangeFold) {  // Note [factor tiles]
        const uint32_t tiles = grid([](const FactorSlot& f) {
          return dispatch::factor_chunks(f.rows) * dispatch::factor_strips(f.cols);
        });
        if (tiles > 0) {
          if (int c = launch_struct(*sums, tiles, &fp, stream); c != LUMINAV_STATUS_OK) return c;
        }
      }
      if (sharded != nullptr) {  // one block per tensor (Note [sharded phases on the device])
        if (int c = launch_struct(*sharded_kernel, fp.num_slots, &fp, stream); c != LUMINAV_STATUS_OK) return c;
      } else {
        const uint32_t row_blocks = grid([](const FactorSlot& f) { return dispatch::factor_row_blocks(f.rows); });
        if (row_blocks > 0) {  // empty tensors have none
          if (int c = launch_struct(*rows_kernel, row_blocks, &fp, stream); c != LUMINAV_STATUS_OK) return c;
        }
        const uint32_t col_blocks = grid([](const FactorSlot& f) {
          return f.col_new == nullptr ? uint64_t{1} : (f.cols + kBlockSize - 1) / kBlockSize;
        });
        if (int c = launch_struct(*cols_kernel, col_blocks, &fp, stream); c != LUMINAV_STATUS_OK) return c;
      }
      fp = FactorParams{};
      return LUMINAV_STATUS_OK;
    };
    for (size_t j = 0; j < g.tensors.size(); ++j) {
      const luminav_tensor& t = g.tensors[j];
      const core::MomentLayout m = core::moment_layout(true, t);
      if (!core::has_row_factor(m)) continue;
      if (fp.num_slots == kMaxFactorSlots || (fp.num_slots > 0 && t.grad_dtype != grad_dtype)) {
        if (int c = flush(); c != LUMINAV_STATUS_OK) return c;
      }
      grad_dtype = t.grad_dtype;
      const dispatch::FactorArrays a = dispatch::factor_arrays(m);
      unsigned char* at = base + *offset;
      *offset += a.bytes;
      const bool factored = m.kind == core::SecondMoment::kFactored;
      FactorSlot& f = fp.slots[fp.num_slots];
      f.grad = t.grad;
      f.old_factors = t.exp_avg_sq;
      f.row_sums = reinterpret_cast<double*>(at + a.row_sums);
      f.row_block_sums = reinterpret_cast<double*>(at + a.row_block_sums);
      f.col_sums = factored ? reinterpret_cast<double*>(at + a.col_sums) : nullptr;
      f.row_new = reinterpret_cast<float*>(at + a.row_new);
      f.col_new = factored ? reinterpret_cast<float*>(at + a.col_new) : nullptr;
      f.col_over_rho = factored ? reinterpret_cast<float*>(at + a.col_over_rho) : nullptr;
      f.view = views + dense + j;
      f.globals = globals + dense + j;
      f.rows = m.rows;
      f.cols = m.cols;
      // Vector loads of 4 elements: every row starts on a 4-element boundary.
      const uintptr_t group_bytes = 4u * static_cast<uintptr_t>(core::dtype_size(t.grad_dtype));
      f.vector_ok = (m.cols % 4 == 0 && reinterpret_cast<uintptr_t>(t.grad) % group_bytes == 0) ? 1u : 0u;
      f.position = g.positions[j];
      if (sharded) f.exchange_cols = sharded->tensors[g.positions[j]].columns;
      if (fp.num_slots == 0) {
        fp.k_device = k;
        fp.words = words;
      }
      ++fp.num_slots;
    }
    return flush();
  }

  static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

  // Runs body(first_index, params) over launches: consecutive tensors of the
  // same dtype pair, at most kMaxSlots per launch and < 2^31 blocks.
  template <class Body>
  static int for_each_batch(std::span<const luminav_tensor> tensors,
                            std::span<const core::TensorGlobals> globals, uint32_t tile_elems,
                            const LaunchParams& base, Body body) {
    constexpr uint64_t kMaxBlocks = (1ull << 31) - 1;
    size_t j = 0;
    while (j < tensors.size()) {
      LaunchParams p = base;
      p.num_slots = 0;
      p.first_tile[0] = 0;
      const size_t first = j;
      uint64_t tiles = 0;
      while (j < tensors.size() && p.num_slots < kMaxSlots &&
             tensors[j].param_dtype == tensors[first].param_dtype &&
             tensors[j].grad_dtype == tensors[first].grad_dtype) {
        const luminav_tensor& t = tensors[j];
        // An empty tensor keeps its slot with no tiles (slot i is tensor first + i).
        const uint64_t n_tiles = (t.num_elements + tile_elems - 1) / tile_elems;
        if (tiles + n_tiles > kMaxBlocks) {
          if (p.num_slots == 0) return fail(LUMINAV_STATUS_INVALID_ARGUMENT, "tensor too large for one launch");
          break;
        }
        TensorSlot& s = p.slots[p.num_slots];
        s.param = t.param;
        s.grad = t.grad;
        s.exp_avg = t.exp_avg;
        s.exp_avg_sq = t.exp_avg_sq;
        s.master = t.master;
        s.num_elements = t.num_elements;
        s.index_offset = t.index_offset;
        s.seed = t.seed;
        s.second_moment = globals[j].second_moment;
        s.cautious_scale = globals[j].cautious_scale;
        s.bound_scale = globals[j].bound_scale;
        s.vector_ok = aligned16(t.param) && aligned16(t.grad) && aligned16(t.exp_avg) &&
                      ((base.k.tdclm && core::moment_layout(true, t).kind != core::SecondMoment::kElementwise) ||
                       aligned16(t.exp_avg_sq)) && (t.master == nullptr || aligned16(t.master));
        tiles += n_tiles;
        ++p.num_slots;
        p.first_tile[p.num_slots] = static_cast<uint32_t>(tiles);
        ++j;
      }
      if (tiles == 0) continue;  // only empty tensors
      if (int code = body(first, p); code != LUMINAV_STATUS_OK) return code;
    }
    return LUMINAV_STATUS_OK;
  }

  static int launch(const Kernel& kernel, uint32_t blocks, const LaunchParams& params, LaunchTarget to) {
    return launch_struct(kernel, blocks, &params, to);
  }

  // Any kernel of kernels.cu: one by-value struct parameter, launched now
  // or recorded into the target's script.
  template <class Params>
  static int launch_struct(const Kernel& kernel, uint32_t blocks, const Params* params, LaunchTarget to) {
    if (to.script != nullptr) {
      to.script->add_kernel(kernel.function, blocks, params, sizeof(Params), kernel.trailing_scratch_ptrs);
      return LUMINAV_STATUS_OK;
    }
    std::string why;
    if (!launch_kernel(kernel.function, blocks, params, kernel.trailing_scratch_ptrs, to.stream, &why)) {
      return fail(LUMINAV_STATUS_DRIVER_ERROR, why);
    }
    return LUMINAV_STATUS_OK;
  }

  std::mutex contexts_mutex_;
  std::map<int, CUcontext> primary_;
  std::map<CUcontext, std::unique_ptr<ContextState>> states_;
};

}  // namespace
}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

}  // namespace luminav
