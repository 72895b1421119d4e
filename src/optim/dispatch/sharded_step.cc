// luminav_step_groups_sharded: a whole step of sharded tensors in phases,
// the caller all-reducing one exchange buffer between them (luminav_groups.h).
// Host backends run here; device backends get the phase through
// Backend::step_sharded and keep everything in device memory.
#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "optim/core/exchange_record.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/step_constants.h"
#include "optim/core/validate.h"
#include "optim/dispatch/async_workspace.h"
#include "optim/dispatch/registry.h"
#include "optim/dispatch/sharded_layout.h"
#include "optim/dispatch/step_driver.h"

namespace luminav::dispatch {
namespace {

std::string tensor_name(const ShardedTensor& s) {
  return "groups[" + std::to_string(s.group) + "].tensors[" + std::to_string(s.index) + "]";
}

// Each shard inside its logical tensor, by whole rows where TD-CLM keeps
// row factors (spec "TD-CLM second moment": a boundary inside a row is refused).
core::Status validate_shards(std::span<const luminav_group> groups, const luminav_shard_layout* shards) {
  size_t t = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const bool tdclm = groups[gi].hp->buffer_mode == LUMINAV_MODE_TDCLM;
    for (size_t i = 0; i < groups[gi].count; ++i, ++t) {
      const luminav_tensor& x = groups[gi].tensors[i];
      const luminav_shard_layout& s = shards[t];
      const std::string name = "groups[" + std::to_string(gi) + "].tensors[" + std::to_string(i) + "]";
      if (x.index_offset > s.logical_num_elements || x.num_elements > s.logical_num_elements - x.index_offset) {
        return core::Status::invalid(name + ": the shard [" + std::to_string(x.index_offset) + ", " +
                                     std::to_string(x.index_offset + x.num_elements) +
                                     ") lies outside its logical tensor of " +
                                     std::to_string(s.logical_num_elements) + " elements");
      }
      if (!tdclm || x.td_factor == LUMINAV_TD_TENSOR || s.logical_num_elements == 0) continue;
      if (s.logical_rows == 0 || s.logical_num_elements % s.logical_rows != 0) {
        return core::Status::invalid(name + ": logical_rows " + std::to_string(s.logical_rows) +
                                     " does not divide the logical tensor's " +
                                     std::to_string(s.logical_num_elements) + " elements");
      }
      const uint64_t cols = s.logical_num_elements / s.logical_rows;
      if (x.index_offset % cols != 0 || x.num_elements % cols != 0 ||
          (x.num_elements > 0 && x.rows * cols != x.num_elements)) {
        return core::Status::invalid(name + ": a shard boundary inside a row (index_offset " +
                                     std::to_string(x.index_offset) + ", " + std::to_string(x.num_elements) +
                                     " elements, rows " + std::to_string(x.rows) + ", C = " + std::to_string(cols) +
                                     "); TD-CLM shards hold whole rows");
      }
    }
  }
  return core::Status::success();
}

int exchanges_of(std::span<const luminav_group> groups) {
  int p = 1;
  for (const luminav_group& g : groups) p = std::max(p, core::reduction_rounds(core::make_step_constants(*g.hp)));
  return p;
}

// The sizes depend on the modes and shapes alone (the gradients may not exist yet).
core::Status validate_shapes(std::span<const luminav_group> groups, const luminav_shard_layout* shards) {
  size_t total = 0;
  for (const luminav_group& g : groups) {
    if (g.hp == nullptr || (g.tensors == nullptr && g.count > 0)) return core::Status::invalid("groups: NULL hp or tensors");
    if (core::Status s = core::validate_hyperparams(g.hp); !s.ok()) return s;
    total += g.count;
  }
  if (shards == nullptr && total > 0) return core::Status::invalid("shards must not be NULL");
  return validate_shards(groups, shards);
}

core::Status validate_sharded(std::span<const luminav_group> groups, const luminav_shard_layout* shards) {
  if (core::Status s = core::validate_groups(groups); !s.ok()) return s;
  size_t total = 0;
  for (const luminav_group& g : groups) total += g.count;
  if (shards == nullptr && total > 0) return core::Status::invalid("shards must not be NULL");
  return validate_shards(groups, shards);
}

// The step constants of each group as the host knows them (host memory: t
// and lr read from the caller's counters and tensors).
std::vector<core::StepConstants> host_constants(std::span<const luminav_group> groups, const luminav_async* async) {
  std::vector<core::StepConstants> out;
  for (const luminav_group& g : groups) {
    luminav_hyperparams hp = *g.hp;
    if (g.step_counter) hp.step = static_cast<uint64_t>(*g.step_counter) + 1;
    if (g.lr) hp.lr = g.lr_dtype == LUMINAV_SCALAR_F64 ? *static_cast<const double*>(g.lr)
                                                      : *static_cast<const float*>(g.lr);
    core::StepConstants k = whole_step_constants(hp);
    k.grad_sq_wanted = 1;  // sharded: sum g^2 is part of the record either way
    if (async && async->grad_scale) k.inv_grad_scale = core::inverse_grad_scale(*async->grad_scale);
    out.push_back(k);
  }
  return out;
}

// The host phases (Note [sharded phases] in luminav_groups.h).
core::Status run_phase_on_host(std::span<const luminav_group> groups, const ShardedLayout& layout, int phase,
                               int exchanges, Backend& backend, const ExecContext& ctx, const luminav_async* async,
                               const luminav_shard_layout* shards, double* exchange, unsigned char* ws) {
  auto* words = reinterpret_cast<AsyncStepWords*>(ws + layout.words);
  auto* globals = reinterpret_cast<core::TensorGlobals*>(ws + layout.globals);
  const std::vector<core::StepConstants> k = host_constants(groups, async);
  auto tensor = [&](const ShardedTensor& s) -> const luminav_tensor& { return groups[s.group].tensors[s.index]; };
  auto rounds_of = [&](const ShardedTensor& s) { return core::reduction_rounds(k[s.group]); };
  // The factor-sum arrays of this shard (workspace), re-attached on every phase.
  auto attach = [&](const ShardedTensor& s, core::TensorGlobals& g) {
    if (s.sums == kNoSums) return;
    g.row_sq_sums = reinterpret_cast<double*>(ws + s.sums);
    g.col_sq_sums = s.local.kind == core::SecondMoment::kFactored ? g.row_sq_sums + s.local.rows : nullptr;
  };

  if (phase == 0) {
    words->first_bad = kNoBadTensor;
    words->blocked = 0;
    for (const ShardedTensor& s : layout.tensors) globals[s.position] = core::initial_globals(k[s.group], 0.0f);
  } else if (!words->blocked) {
    const int round = phase - 1;
    if (round == 0 && exchange[0] != 0.0) words->blocked = 1;  // found_inf on some rank
    for (const ShardedTensor& s : layout.tensors) {
      if (words->blocked || round >= rounds_of(s)) continue;
      const luminav_tensor& x = tensor(s);
      const double* record = exchange + s.record;
      const uint64_t logical_n = shards[s.position].logical_num_elements;
      if (round == 0 && core::exchange_record_elements(record) != logical_n) {
        return core::Status::invalid(tensor_name(s) + ": the shards hold " +
                                     std::to_string(core::exchange_record_elements(record)) +
                                     " elements in all, the shard layout says " + std::to_string(logical_n) +
                                     " (the ranks disagree on the tensor)");
      }
      core::TensorGlobals& g = globals[s.position];
      attach(s, g);
      const float s_old = (k[s.group].tdclm && x.num_elements > 0 && x.td_factor == LUMINAV_TD_TENSOR)
                              ? x.exp_avg_sq[0] : 0.0f;
      const core::Status st = core::finalize_round(k[s.group], core::load_exchange_record(record), logical_n, round,
                                                   s_old, g);
      if (st.code == LUMINAV_STATUS_NONFINITE_GRAD) {
        words->first_bad = std::min(words->first_bad, s.position);
        continue;
      }
      if (!st.ok()) return st;
      if (round == 0 && s.cols > 0 && s.sums != kNoSums) {  // the reduced column sums, kept for later
        std::memcpy(g.col_sq_sums, exchange + s.columns, s.cols * sizeof(double));
      }
    }
  }
  for (const ShardedTensor& s : layout.tensors) attach(s, globals[s.position]);
  const bool bad = words->blocked != 0 || words->first_bad != kNoBadTensor;

  if (phase < exchanges) {
    std::fill(exchange, exchange + layout.exchange_doubles, 0.0);
    if (phase == 0) exchange[0] = (async && async->found_inf && *async->found_inf != 0.0f) ? 1.0 : 0.0;
    if (bad) return core::Status::success();  // zeros: the other ranks' collectives still match
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      if (phase >= core::reduction_rounds(k[gi])) continue;
      std::vector<const ShardedTensor*> members;
      std::vector<luminav_tensor> work;
      std::vector<core::TensorGlobals> work_globals;
      for (const ShardedTensor& s : layout.tensors) {
        if (s.group != gi || tensor(s).num_elements == 0) continue;
        members.push_back(&s);
        work.push_back(tensor(s));
        work_globals.push_back(globals[s.position]);
      }
      if (work.empty()) continue;
      std::vector<luminav_partials> partials(work.size());
      const int code = backend.reduce(k[gi], work, phase, work_globals, partials, ctx);
      if (code != LUMINAV_STATUS_OK) return backend_failure(backend, code, "reduce");
      for (size_t j = 0; j < work.size(); ++j) {
        const ShardedTensor& s = *members[j];
        core::store_exchange_record(partials[j], work[j].num_elements, exchange + s.record);
        if (phase == 0 && s.cols > 0 && work_globals[j].col_sq_sums != nullptr) {
          std::memcpy(exchange + s.columns, work_globals[j].col_sq_sums, s.cols * sizeof(double));
        }
      }
    }
    return core::Status::success();
  }

  // The last phase: apply, or report what every rank found.
  luminav_step_status* status = async ? async->status : nullptr;
  if (bad) {
    const bool found_inf = words->blocked != 0;
    const uint32_t verdict = found_inf ? LUMINAV_VERDICT_FOUND_INF : words->first_bad + 1;
    if (status) {
      status->verdict = verdict;
      if (found_inf || async->skip_nonfinite) ++status->skipped;
    }
    if (!found_inf && async && async->found_inf) *async->found_inf = 1.0f;
    if (found_inf || (async && async->skip_nonfinite)) return core::Status::success();
    const ShardedTensor& s = layout.tensors[words->first_bad];
    return core::Status::error(LUMINAV_STATUS_NONFINITE_GRAD,
                               tensor_name(s) + ": non-finite gradient on at least one shard; no rank wrote "
                                                "anything");
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    std::vector<luminav_tensor> work;
    std::vector<core::TensorGlobals> work_globals;
    for (const ShardedTensor& s : layout.tensors) {
      if (s.group != gi || tensor(s).num_elements == 0) continue;
      work.push_back(tensor(s));
      work_globals.push_back(globals[s.position]);
    }
    if (work.empty()) continue;
    const int code = backend.apply(k[gi], work, work_globals, ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(backend, code, "apply");
  }
  for (const luminav_group& g : groups) {
    if (g.step_counter) *g.step_counter += 1.0f;
  }
  if (status) status->verdict = 0;
  return core::Status::success();
}

}  // namespace

int sharded_exchanges(const luminav_group* groups, size_t count) {
  if (groups == nullptr && count > 0) return -LUMINAV_STATUS_INVALID_ARGUMENT;
  for (size_t i = 0; i < count; ++i) {
    if (core::Status s = core::validate_hyperparams(groups[i].hp); !s.ok()) return -s.code;
  }
  return exchanges_of(std::span(groups, count));
}

size_t sharded_exchange_doubles(const luminav_group* groups, size_t count, const luminav_shard_layout* shards) {
  if (groups == nullptr || count == 0) return 0;
  const std::span<const luminav_group> all(groups, count);
  if (!validate_shapes(all, shards).ok()) return 0;
  return sharded_layout(all, shards).exchange_doubles;
}

size_t sharded_workspace_bytes(const luminav_group* groups, size_t count, const luminav_shard_layout* shards) {
  if (groups == nullptr || count == 0) return 0;
  const std::span<const luminav_group> all(groups, count);
  if (!validate_shapes(all, shards).ok()) return 0;
  // Host backends use the sharded layout, device backends the asynchronous step's.
  return std::max(sharded_layout(all, shards).workspace_bytes, groups_workspace_bytes(groups, count));
}

core::Status run_step_groups_sharded(const luminav_group* groups, size_t count, const luminav_shard_layout* shards,
                                     const luminav_options* options, const luminav_async* async, int phase,
                                     double* exchange) {
  if (groups == nullptr && count > 0) return core::Status::invalid("groups must not be NULL");
  const std::span<const luminav_group> all(groups, count);
  if (core::Status s = validate_sharded(all, shards); !s.ok()) return s;
  if (async && async->status == nullptr) return core::Status::invalid("async.status must not be NULL");
  if (count == 0) return core::Status::success();
  const int exchanges = exchanges_of(all);
  if (phase < 0 || phase > exchanges) {
    return core::Status::invalid("phase must be in [0, " + std::to_string(exchanges) + "] for these groups (got " +
                                 std::to_string(phase) + ")");
  }
  if (exchange == nullptr) return core::Status::invalid("exchange must not be NULL");
  const ShardedLayout layout = sharded_layout(all, shards);
  size_t total_elements = 0;
  for (const luminav_group& g : all) {
    for (size_t i = 0; i < g.count; ++i) total_elements += g.tensors[i].num_elements;
  }
  Backend* backend = nullptr;
  if (core::Status s = select_backend(options, std::max<size_t>(total_elements, 1), &backend); !s.ok()) return s;
  const ExecContext ctx = context_of(options);
  if (backend->supports_async()) {
    if (async == nullptr) {
      return core::Status::invalid("backend '" + std::string(backend->name()) +
                                   "' runs the step asynchronously: async (with a device status word) is required");
    }
    std::vector<Work> work;
    for (const luminav_group& g : all) work.push_back(nonempty(std::span(g.tensors, g.count)));
    const std::vector<AsyncGroup> groups_work = async_groups(all, std::span(work));
    const size_t needed = async_workspace_layout(groups_work).total_bytes;
    if (ctx.scratch == nullptr || ctx.scratch_bytes < needed) {
      return core::Status::invalid("scratch must be a device workspace of " + std::to_string(needed) +
                                   " bytes (luminav_sharded_workspace_bytes), got " +
                                   std::to_string(ctx.scratch ? ctx.scratch_bytes : 0));
    }
    const int code = backend->step_sharded(groups_work, layout, phase, exchanges, *async, exchange, ctx);
    if (code != LUMINAV_STATUS_OK) return backend_failure(*backend, code, "step_sharded");
    note_last_backend(*backend);
    return core::Status::success();
  }
  if (ctx.scratch == nullptr || ctx.scratch_bytes < layout.workspace_bytes) {
    return core::Status::invalid("scratch must be a workspace of " + std::to_string(layout.workspace_bytes) +
                                 " bytes (luminav_sharded_workspace_bytes), got " +
                                 std::to_string(ctx.scratch ? ctx.scratch_bytes : 0));
  }
  ExecContext host_ctx = ctx;
  host_ctx.scratch = nullptr;  // the workspace is this driver's; host backends keep their own scratch
  host_ctx.scratch_bytes = 0;
  core::Status s = run_phase_on_host(all, layout, phase, exchanges, *backend, host_ctx, async, shards, exchange,
                                     static_cast<unsigned char*>(ctx.scratch));
  if (s.ok()) note_last_backend(*backend);
  return s;
}

}  // namespace luminav::dispatch
