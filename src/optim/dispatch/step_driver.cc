// validate -> step constants -> reduction rounds (finite check of every
// tensor before anything is written) -> globals -> apply.
#include "optim/dispatch/step_driver.h"

#include <span>
#include <string>
#include <vector>

#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/step_constants.h"
#include "optim/core/validate.h"
#include "optim/dispatch/backend_error.h"
#include "optim/dispatch/registry.h"

namespace luminav::dispatch {
namespace {

thread_local std::string last_backend;

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

// Validates hyperparameters, tensors and the caller's scratch.
core::Status validate_call(const luminav_hyperparams* hp, std::span<const luminav_tensor> tensors,
                           const luminav_options* options) {
  if (core::Status s = core::validate_hyperparams(hp); !s.ok()) return s;
  const void* scratch = options ? options->scratch : nullptr;
  const size_t scratch_bytes = options ? options->scratch_bytes : 0;
  return core::validate_tensors(*hp, tensors, scratch, scratch_bytes);
}

core::Status backend_failure(const Backend& backend, int code, const char* entry) {
  std::string message = take_backend_error();
  if (message.empty()) {
    message = "backend '" + std::string(backend.name()) + "' failed in " + entry;
  }
  return core::Status::error(code, std::move(message));
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

// Row and column sums of every factored/row tensor of a whole step, owned by
// the calling thread and reused (host memory: the CPU backends).
void attach_step_factor_sums(const core::StepConstants& k, std::span<const luminav_tensor> work,
                             std::span<core::TensorGlobals> globals) {
  thread_local std::vector<double> sums_of_thread;
  std::vector<double>& sums = sums_of_thread;
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

core::Status run_step(const luminav_hyperparams* hp, const luminav_tensor* tensors, size_t count,
                      const luminav_options* options) {
  if (tensors == nullptr && count > 0) return core::Status::invalid("tensors must not be NULL");
  const std::span<const luminav_tensor> all(tensors, count);
  if (core::Status s = validate_call(hp, all, options); !s.ok()) return s;

  // Empty tensors have nothing to do (spec: N = 0 is success).
  std::vector<luminav_tensor> work;
  std::vector<size_t> position;
  size_t total_elements = 0;
  for (size_t i = 0; i < count; ++i) {
    if (all[i].num_elements == 0) continue;
    work.push_back(all[i]);
    position.push_back(i);
    total_elements += all[i].num_elements;
  }
  if (work.empty()) return core::Status::success();

  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, total_elements, &backend); !s.ok()) return s;
  const ExecContext ctx = context_of(options);
  core::StepConstants k = core::make_step_constants(*hp);
  k.grad_sq_wanted = k.tdclm;  // a whole step: only TD-CLM's s uses sum g^2

  std::vector<float> s_old(work.size(), 0.0f);
  if (k.tdclm) {
    std::vector<const float*> addresses(work.size());
    for (size_t j = 0; j < work.size(); ++j) addresses[j] = work[j].exp_avg_sq;
    const int code = backend->load_scalars(addresses, s_old, ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "load_scalars");
  }
  std::vector<core::TensorGlobals> globals(work.size());
  for (size_t j = 0; j < work.size(); ++j) globals[j] = core::initial_globals(k, s_old[j]);
  // Note [factor sums of device backends]: a device backend gets no host
  // arrays here and finds its own memory for them (cuda refuses
  // factored/row tensors until it does).
  if (k.tdclm && backend->device_type() == LUMINAV_DEVICE_CPU) {
    attach_step_factor_sums(k, work, globals);
  }

  const int rounds = core::reduction_rounds(k);
  std::vector<luminav_partials> partials(work.size());
  for (int round = 0; round < rounds; ++round) {
    const int code = backend->reduce(k, work, round, globals, partials, ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "reduce");
    for (size_t j = 0; j < work.size(); ++j) {
      core::Status s = core::finalize_round(k, partials[j], work[j].num_elements, round, s_old[j],
                                            globals[j]);
      if (!s.ok()) {
        if (count > 1) s.message = "tensors[" + std::to_string(position[j]) + "]: " + s.message;
        return s;
      }
    }
  }

  const int code = backend->apply(k, work, globals, ctx);
  if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "apply");
  last_backend = backend_label(*backend);
  return core::Status::success();
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
