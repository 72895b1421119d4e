// validate -> step constants -> reduction rounds (finite check of every
// tensor before anything is written) -> globals -> apply.
#include "optim/dispatch/step_driver.h"

#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/step_constants.h"
#include "optim/core/validate.h"
#include "optim/dispatch/async_workspace.h"
#include "optim/dispatch/backend_error.h"
#include "optim/dispatch/host_trace.h"
#include "optim/dispatch/registry.h"

namespace luminav::dispatch {

ExecContext context_of(const luminav_options* options) {
  ExecContext ctx;
  if (options) {
    ctx.device_index = options->device_index;
    ctx.stream = options->stream;
    ctx.scratch = options->scratch;
    ctx.scratch_bytes = options->scratch ? options->scratch_bytes : 0;
  }
  return ctx;
}

core::Status backend_failure(const Backend& backend, int code, const char* entry) {
  std::string message = take_backend_error();
  if (message.empty()) {
    message = "backend '" + std::string(backend.name()) + "' failed in " + entry;
  }
  return core::Status::error(code, std::move(message));
}

core::StepConstants whole_step_constants(const luminav_hyperparams& hp) {
  core::StepConstants k = core::make_step_constants(hp);
  k.grad_sq_wanted = k.tdclm;  // a whole step: only TD-CLM's s uses sum g^2
  return k;
}

namespace {

thread_local std::string last_backend;

// Validates hyperparameters, tensors and the caller's scratch.
core::Status validate_call(const luminav_hyperparams* hp, std::span<const luminav_tensor> tensors,
                           const luminav_options* options) {
  if (core::Status s = core::validate_hyperparams(hp); !s.ok()) return s;
  const void* scratch = options ? options->scratch : nullptr;
  const size_t scratch_bytes = options ? options->scratch_bytes : 0;
  return core::validate_tensors(*hp, tensors, scratch, scratch_bytes);
}

core::TensorGlobals to_core(const luminav_globals& g) {
  core::TensorGlobals c;
  c.second_moment = g.second_moment;
  c.cautious_scale = g.cautious_scale;
  c.bound_scale = g.bound_scale;
  c.row_factor_mean = g.row_factor_mean;
  c.logical_rows = g.logical_rows;
  return c;
}

luminav_globals to_public(const core::TensorGlobals& c) {
  luminav_globals g{};
  g.second_moment = c.second_moment;
  g.cautious_scale = c.cautious_scale;
  g.bound_scale = c.bound_scale;
  g.row_factor_mean = c.row_factor_mean;
  g.logical_rows = c.logical_rows;
  return g;
}

// The caller's factor sums of a shard, which its layout must have
// (luminav_factor_sums): row sums for kRow/kFactored, column sums for kFactored.
core::Status attach_factor_sums(const core::StepConstants& k, const luminav_tensor& shard,
                                const luminav_factor_sums* sums, core::TensorGlobals& g) {
  const core::MomentLayout layout = core::moment_layout(k.tdclm, shard);
  if (!core::has_row_factor(layout)) return core::Status::success();
  const bool factored = layout.kind == core::SecondMoment::kFactored;
  const char* kind = factored ? "factored" : "row";
  if (sums == nullptr || sums->row_sq == nullptr) {
    return core::Status::invalid(std::string("factor_sums.row_sq must not be NULL with td_factor ") +
                                 kind + " and C = " + std::to_string(layout.cols) + " > 1 (" +
                                 std::to_string(layout.rows) +
                                 " doubles; luminav_reduce_with_factors / luminav_apply_with_factors)");
  }
  if (factored && sums->col_sq == nullptr) {
    return core::Status::invalid("factor_sums.col_sq must not be NULL with td_factor factored and C = " +
                                 std::to_string(layout.cols) + " > 1 (C doubles, all-reduced)");
  }
  g.row_sq_sums = sums->row_sq;
  g.col_sq_sums = factored ? sums->col_sq : nullptr;
  return core::Status::success();
}

// Row and column sums of every factored/row tensor of a whole step, in
// `sums` (host memory: the CPU backends).
void attach_step_factor_sums(const core::StepConstants& k, std::span<const luminav_tensor> work,
                             std::span<core::TensorGlobals> globals, std::vector<double>& sums) {
  size_t total = 0;
  for (const luminav_tensor& t : work) {
    const core::MomentLayout l = core::moment_layout(k.tdclm, t);
    if (core::has_row_factor(l)) total += l.rows + (l.kind == core::SecondMoment::kFactored ? l.cols : 0);
  }
  sums.resize(total);
  size_t at = 0;
  for (size_t j = 0; j < work.size(); ++j) {
    const core::MomentLayout l = core::moment_layout(k.tdclm, work[j]);
    if (!core::has_row_factor(l)) continue;
    globals[j].row_sq_sums = sums.data() + at;
    at += l.rows;
    if (l.kind == core::SecondMoment::kFactored) {
      globals[j].col_sq_sums = sums.data() + at;
      at += l.cols;
    }
  }
}

core::Status check_round(const core::StepConstants& k, int round, bool for_finalize) {
  const int rounds = core::reduction_rounds(k);
  const int limit = for_finalize && rounds == 0 ? 1 : rounds;
  if (round < 0 || round >= limit) {
    return core::Status::invalid("round must be in [0, " + std::to_string(limit) +
                                 ") for these hyperparameters (got " + std::to_string(round) + ")");
  }
  return core::Status::success();
}


}  // namespace

void fill_nonempty(std::span<const luminav_tensor> all, Work& w) {
  w.tensors.clear();
  w.position.clear();
  w.call_position.clear();
  w.total_elements = 0;
  w.tensors.reserve(all.size());
  w.position.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].num_elements == 0) continue;
    w.tensors.push_back(all[i]);
    w.position.push_back(i);
    w.total_elements += all[i].num_elements;
  }
}

Work nonempty(std::span<const luminav_tensor> all) {
  Work w;
  fill_nonempty(all, w);
  return w;
}

namespace {

// Pass 1 of a whole step on the host side of the driver: the reduction
// rounds and their finalize (TD-CLM's row and column sums in `factor_sums`,
// which must outlive the apply pass). A non-finite gradient fails with a
// message naming `name_of(position)`.
template <class NameOf>
core::Status reduce_and_finalize(Backend& backend, const core::StepConstants& k, const Work& work,
                                 const ExecContext& ctx, std::vector<core::TensorGlobals>& globals,
                                 std::vector<double>& factor_sums, NameOf name_of,
                                 size_t* failed_position = nullptr) {
  // Reused by the thread's steps (no allocation per step for a thousand tensors).
  thread_local std::vector<float> s_old_of_thread;
  thread_local std::vector<luminav_partials> partials_of_thread;
  std::vector<float>& s_old = s_old_of_thread;
  s_old.assign(work.tensors.size(), 0.0f);
  if (k.tdclm && !(ctx.whole_step && backend.finalizes_on_device(k))) {  // Note [device finalize]
    std::vector<const float*> addresses(work.tensors.size());
    for (size_t j = 0; j < work.tensors.size(); ++j) addresses[j] = work.tensors[j].exp_avg_sq;
    const int code = backend.load_scalars(addresses, s_old, ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(backend, code, "load_scalars");
  }
  globals.resize(work.tensors.size());
  for (size_t j = 0; j < work.tensors.size(); ++j) globals[j] = core::initial_globals(k, s_old[j]);
  // Note [factor sums of device backends]: a device backend gets no host
  // arrays here and finds its own memory for them (cuda refuses
  // factored/row tensors until it does).
  if (k.tdclm && backend.device_type() == LUMINAV_DEVICE_CPU) {
    attach_step_factor_sums(k, work.tensors, globals, factor_sums);
  }
  const int rounds = core::reduction_rounds(k);
  std::vector<luminav_partials>& partials = partials_of_thread;
  partials.resize(work.tensors.size());
  for (int round = 0; round < rounds; ++round) {
    const int code = backend.reduce(k, work.tensors, round, globals, partials, ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(backend, code, "reduce");
    for (size_t j = 0; j < work.tensors.size(); ++j) {
      core::Status s = core::finalize_round(k, partials[j], work.tensors[j].num_elements, round, s_old[j],
                                            globals[j]);
      if (!s.ok()) {
        if (failed_position != nullptr) *failed_position = work.position[j];
        const std::string name = name_of(work.position[j]);
        if (!name.empty()) s.message = name + ": " + s.message;
        return s;
      }
    }
  }
  return core::Status::success();
}

}  // namespace

void note_last_backend(const Backend& backend) { last_backend = backend_label(backend); }

core::Status run_step(const luminav_hyperparams* hp, const luminav_tensor* tensors, size_t count,
                      const luminav_options* options) {
  if (tensors == nullptr && count > 0) return core::Status::invalid("tensors must not be NULL");
  const std::span<const luminav_tensor> all(tensors, count);
  if (core::Status s = validate_call(hp, all, options); !s.ok()) return s;

  // Empty tensors have nothing to do (spec: N = 0 is success).
  const Work work = nonempty(all);
  if (work.tensors.empty()) return core::Status::success();

  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, work.total_elements, &backend, work.tensors[0].param); !s.ok()) {
    return s;
  }
  ExecContext ctx = context_of(options);
  ctx.whole_step = true;
  const core::StepConstants k = whole_step_constants(*hp);
  std::vector<core::TensorGlobals> globals;
  thread_local std::vector<double> factor_sums;  // reused by the thread's steps
  core::Status s = reduce_and_finalize(*backend, k, work, ctx, globals, factor_sums, [&](size_t i) {
    return count > 1 ? "tensors[" + std::to_string(i) + "]" : std::string();
  });
  if (!s.ok()) return s;
  const int code = backend->apply(k, work.tensors, globals, ctx);
  if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "apply");
  last_backend = backend_label(*backend);
  return core::Status::success();
}

namespace {

// Host memory: the groups one after the other, every finite check first.
core::Status run_groups_on_host(std::span<const luminav_group> groups, std::span<const Work> work,
                                Backend& backend, const ExecContext& ctx, const luminav_async* async) {
  luminav_step_status* status = async ? async->status : nullptr;
  auto finish = [&](uint32_t verdict) {
    if (status == nullptr) return;
    status->verdict = verdict;
    if (verdict != 0) ++status->skipped;
  };
  if (async && async->found_inf && *async->found_inf != 0.0f) {
    finish(LUMINAV_VERDICT_FOUND_INF);
    return core::Status::success();
  }
  // Reused by the thread's steps; each group's entries are rewritten before use.
  thread_local std::vector<core::StepConstants> constants_of_thread;
  thread_local std::vector<std::vector<core::TensorGlobals>> globals_of_thread;
  thread_local std::vector<std::vector<double>> factor_sums_of_thread;
  std::vector<core::StepConstants>& constants = constants_of_thread;
  std::vector<std::vector<core::TensorGlobals>>& globals = globals_of_thread;
  std::vector<std::vector<double>>& factor_sums = factor_sums_of_thread;
  constants.resize(groups.size());
  if (globals.size() < groups.size()) globals.resize(groups.size());
  if (factor_sums.size() < groups.size()) factor_sums.resize(groups.size());
  uint32_t first_position = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const luminav_group& g = groups[gi];
    luminav_hyperparams hp = *g.hp;
    if (g.step_counter) hp.step = static_cast<uint64_t>(*g.step_counter) + 1;
    if (g.lr) hp.lr = g.lr_dtype == LUMINAV_SCALAR_F64 ? *static_cast<const double*>(g.lr)
                                                      : *static_cast<const float*>(g.lr);
    constants[gi] = whole_step_constants(hp);
    if (async && async->grad_scale) constants[gi].inv_grad_scale = core::inverse_grad_scale(*async->grad_scale);
    if (work[gi].tensors.empty()) {
      first_position += static_cast<uint32_t>(g.count);
      continue;
    }
    size_t failed = 0;
    core::Status s = reduce_and_finalize(
        backend, constants[gi], work[gi], ctx, globals[gi], factor_sums[gi],
        [&](size_t i) { return "groups[" + std::to_string(gi) + "].tensors[" + std::to_string(i) + "]"; }, &failed);
    if (s.code == LUMINAV_STATUS_NONFINITE_GRAD && async != nullptr) {
      // The first failing tensor's position (as a device would report it).
      if (async->found_inf) *async->found_inf = 1.0f;
      finish(first_position + static_cast<uint32_t>(failed) + 1);
      if (async->skip_nonfinite) return core::Status::success();
    }
    if (!s.ok()) return s;
    first_position += static_cast<uint32_t>(g.count);
  }
  host_trace_mark("reduce");
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (work[gi].tensors.empty()) continue;
    const int code = backend.apply(constants[gi], work[gi].tensors, globals[gi], ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(backend, code, "apply");
  }
  host_trace_mark("apply");
  for (const luminav_group& g : groups) {
    if (g.step_counter) *g.step_counter += 1.0f;
  }
  finish(0);
  return core::Status::success();
}

}  // namespace

std::vector<AsyncGroup> async_groups(std::span<const luminav_group> groups, std::span<Work> work) {
  std::vector<AsyncGroup> out;
  uint32_t first_position = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const luminav_group& g = groups[gi];
    Work& w = work[gi];
    if (!w.tensors.empty()) {
      w.call_position.resize(w.tensors.size());
      for (size_t j = 0; j < w.tensors.size(); ++j) {
        w.call_position[j] = first_position + static_cast<uint32_t>(w.position[j]);
      }
      AsyncGroup a{};
      a.k = whole_step_constants(*g.hp);
      a.tensors = w.tensors;
      a.positions = w.call_position;
      a.step_counter = g.step_counter;
      a.lr = g.lr;
      a.lr_dtype = g.lr_dtype;
      a.lr_host = g.hp->lr;
      a.beta1 = g.hp->beta1;
      a.beta2 = g.hp->beta2;
      a.weight_decay = g.hp->weight_decay;
      out.push_back(a);
    }
    first_position += static_cast<uint32_t>(g.count);
  }
  return out;
}

core::Status run_step_groups(const luminav_group* groups, size_t count, const luminav_options* options,
                             const luminav_async* async, bool enqueue) {
  host_trace_begin();  // Note [host trace]
  if (groups == nullptr && count > 0) return core::Status::invalid("groups must not be NULL");
  const std::span<const luminav_group> all(groups, count);
  if (core::Status s = core::validate_groups(all); !s.ok()) return s;
  host_trace_mark("validate");
  if (async && async->status == nullptr) return core::Status::invalid("async.status must not be NULL");
  thread_local std::vector<Work> work_of_thread;  // reused: no copy of a thousand tensors into fresh arrays
  std::vector<Work>& work_storage = work_of_thread;
  if (work_storage.size() < count) work_storage.resize(count);
  const std::span<Work> work(work_storage.data(), count);
  size_t total_elements = 0;
  for (size_t gi = 0; gi < count; ++gi) {
    fill_nonempty(std::span(all[gi].tensors, all[gi].count), work[gi]);
    total_elements += work[gi].total_elements;
  }
  host_trace_mark("work lists");
  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, total_elements, &backend); !s.ok()) return s;
  host_trace_mark("backend choice");
  ExecContext ctx = context_of(options);
  if (!backend->supports_async() && backend->device_type() != LUMINAV_DEVICE_CPU) {
    // The host-side groups driver reads step counters, lr and the status word
    // on the host: device memory there would be read as host memory.
    return core::Status::error(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                               "backend '" + std::string(backend->name()) +
                                   "' runs luminav_step / luminav_step_multi only, not luminav_step_groups "
                                   "(the asynchronous step needs the cuda backend)");
  }
  if (!backend->supports_async() && enqueue) {
    if (async == nullptr) return core::Status::invalid("luminav_step_groups_enqueue: async (with a status word) is required");
    bool enqueued = false;
    const int code = backend->enqueue_host_step(async_groups(all, std::span(work)), *async, &enqueued);
    if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "enqueue_host_step");
    if (enqueued) {
      last_backend = backend_label(*backend);
      return core::Status::success();
    }
  }
  if (!backend->supports_async()) {
    ctx.scratch = nullptr;  // host backends keep their own scratch
    ctx.scratch_bytes = 0;
    core::Status s = run_groups_on_host(all, work, *backend, ctx, async);
    if (s.ok()) last_backend = backend_label(*backend);
    return s;
  }
  if (async == nullptr) {
    return core::Status::invalid("backend '" + std::string(backend->name()) +
                                 "' runs the step asynchronously: async (with a device status word) is required");
  }
  const std::vector<AsyncGroup> groups_work = async_groups(all, work);
  if (groups_work.empty()) return core::Status::success();
  const size_t needed = async_workspace_layout(groups_work).total_bytes;
  if (ctx.scratch == nullptr || ctx.scratch_bytes < needed) {
    return core::Status::invalid("scratch must be a device workspace of " + std::to_string(needed) +
                                 " bytes (luminav_groups_workspace_bytes), got " +
                                 std::to_string(ctx.scratch ? ctx.scratch_bytes : 0));
  }
  host_trace_mark("async groups");
  const int code = backend->step_async(groups_work, *async, ctx);
  host_trace_mark("backend step");
  if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "step_async");
  last_backend = backend_label(*backend);
  return core::Status::success();
}

core::Status run_synchronize(const luminav_options* options) {
  std::string_view requested;
  if (options && options->backend && *options->backend) requested = options->backend;
  if (requested.empty() || requested == "auto") {
    const char* env = std::getenv("LUMINAV_FORCE_BACKEND");
    requested = (env && *env) ? std::string_view(env) : std::string_view();
  }
  if (requested.empty() || requested == "auto") {
    // "auto": every backend, as steps forced onto one are waited for too (a
    // backend that never enqueued a step returns at once, without a probe).
    for (size_t i = 0; i < backend_count(); ++i) {
      Backend& b = backend_at(i);
      if (const int code = b.synchronize(); code != LUMINAV_STATUS_OK) return backend_failure(b, code, "synchronize");
    }
    return core::Status::success();
  }
  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, 0, &backend); !s.ok()) return s;
  const int code = backend->synchronize();
  if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "synchronize");
  return core::Status::success();
}

size_t groups_workspace_bytes(const luminav_group* groups, size_t count) {
  if (groups == nullptr || count == 0) return 0;
  const std::span<const luminav_group> all(groups, count);
  // The size depends on the shapes alone (the gradients may not exist yet).
  for (const luminav_group& g : all) {
    if (g.hp == nullptr || (g.tensors == nullptr && g.count > 0)) return 0;
  }
  std::vector<Work> work;
  for (const luminav_group& g : all) work.push_back(nonempty(std::span(g.tensors, g.count)));
  const std::vector<AsyncGroup> groups_work = async_groups(all, std::span(work));
  return async_workspace_layout(groups_work).total_bytes;
}

core::Status run_reduction_rounds(const luminav_hyperparams* hp, int* rounds) {
  if (core::Status s = core::validate_hyperparams(hp); !s.ok()) return s;
  *rounds = core::reduction_rounds(core::make_step_constants(*hp));
  return core::Status::success();
}

core::Status run_reduce(const luminav_hyperparams* hp, const luminav_tensor* shard, int round,
                        const luminav_globals* globals, const luminav_factor_sums* factor_sums,
                        luminav_partials* out, const luminav_options* options) {
  if (shard == nullptr) return core::Status::invalid("shard must not be NULL");
  if (out == nullptr) return core::Status::invalid("out must not be NULL");
  if (core::Status s = validate_call(hp, std::span(shard, 1), options); !s.ok()) return s;
  const core::StepConstants k = core::make_step_constants(*hp);
  if (core::Status s = check_round(k, round, false); !s.ok()) return s;
  if (round > 0 && globals == nullptr) {
    return core::Status::invalid("globals must not be NULL in round " + std::to_string(round));
  }
  if (shard->num_elements == 0) {
    *out = luminav_partials{};
    return core::Status::success();
  }
  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, shard->num_elements, &backend); !s.ok()) return s;
  core::TensorGlobals g = globals ? to_core(*globals) : core::initial_globals(k, 0.0f);
  if (core::Status s = attach_factor_sums(k, *shard, factor_sums, g); !s.ok()) return s;
  luminav_partials partial{};
  const int code = backend->reduce(k, std::span(shard, 1), round, std::span(&g, 1),
                                   std::span(&partial, 1), context_of(options));
  if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "reduce");
  *out = partial;
  last_backend = backend_label(*backend);
  return core::Status::success();
}

core::Status run_finalize(const luminav_hyperparams* hp, const luminav_partials* global_sum,
                          uint64_t logical_num_elements, int round, float s_old,
                          luminav_globals* inout) {
  if (core::Status s = core::validate_hyperparams(hp); !s.ok()) return s;
  if (global_sum == nullptr) return core::Status::invalid("global_sum must not be NULL");
  if (inout == nullptr) return core::Status::invalid("globals must not be NULL");
  const core::StepConstants k = core::make_step_constants(*hp);
  if (core::Status s = check_round(k, round, true); !s.ok()) return s;
  core::TensorGlobals g = to_core(*inout);
  if (core::Status s = core::finalize_round(k, *global_sum, logical_num_elements, round, s_old, g);
      !s.ok()) {
    return s;
  }
  *inout = to_public(g);
  return core::Status::success();
}

core::Status run_apply(const luminav_hyperparams* hp, const luminav_tensor* shard,
                       const luminav_globals* globals, const luminav_factor_sums* factor_sums,
                       const luminav_options* options) {
  if (shard == nullptr) return core::Status::invalid("shard must not be NULL");
  if (globals == nullptr) return core::Status::invalid("globals must not be NULL");
  if (core::Status s = validate_call(hp, std::span(shard, 1), options); !s.ok()) return s;
  if (shard->num_elements == 0) return core::Status::success();
  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, shard->num_elements, &backend); !s.ok()) return s;
  const core::StepConstants k = core::make_step_constants(*hp);
  core::TensorGlobals g = to_core(*globals);
  if (core::Status s = attach_factor_sums(k, *shard, factor_sums, g); !s.ok()) return s;
  const int code = backend->apply(k, std::span(shard, 1), std::span(&g, 1), context_of(options));
  if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "apply");
  last_backend = backend_label(*backend);
  return core::Status::success();
}

const char* last_backend_label() { return last_backend.c_str(); }

}  // namespace luminav::dispatch
