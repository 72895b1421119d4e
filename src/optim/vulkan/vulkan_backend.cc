// The Vulkan backend: host tensors stepped by compute shaders, read in place
// where the device imports host memory (vulkan_passes.h). The driver's
// finalize runs on the host between the passes, as for the CPU backends
// (this backend's memory is host memory: LUMINAV_DEVICE_CPU).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "optim/core/factor_update.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/dispatch/backend.h"
#include "optim/dispatch/backend_error.h"
#include "optim/dispatch/backend_factories.h"
#include "optim/vulkan/vulkan_async.h"
#include "optim/vulkan/vulkan_context.h"
#include "optim/vulkan/vulkan_passes.h"

namespace luminav {
namespace vulkan {
namespace {

using core::MomentLayout;
using core::SecondMoment;
using core::StepConstants;
using core::TensorGlobals;

StepParams step_params(const StepConstants& e, const TensorGlobals& gl, const luminav_tensor& t,
                       const MomentLayout& layout) {
  StepParams p{};
  p.seed = t.seed;
  p.step = e.step;
  p.lr = e.lr;
  p.beta1 = e.beta1;
  p.one_minus_beta1 = e.one_minus_beta1;
  p.beta2 = e.beta2;
  p.one_minus_beta2 = e.one_minus_beta2;
  p.eps = e.eps;
  p.decay_factor = e.decay_factor;
  p.inv_bias_correction1 = e.inv_bias_correction1;
  p.inv_bias_correction2 = e.inv_bias_correction2;
  p.lam = e.lam;
  p.one_minus_lam = e.one_minus_lam;
  p.tau = e.tau;
  p.bound_ratio = e.bound_ratio;
  p.inv_grad_scale = e.inv_grad_scale;
  p.second_moment = gl.second_moment;
  p.cautious_scale = gl.cautious_scale;
  p.bound_scale = gl.bound_scale;
  p.kind = static_cast<uint32_t>(layout.kind);
  p.cautious = static_cast<uint32_t>(e.cautious);
  // The shaders scale d by bound_scale for the tensor bound (1); the RMS clip
  // (3) scales it alike, its factor formed on the host (core::fold_round_sums).
  p.bound_mode = static_cast<uint32_t>(e.bound_mode == LUMINAV_BOUND_RMS ? LUMINAV_BOUND_TENSOR : e.bound_mode);
  p.stochastic_rounding = static_cast<uint32_t>(e.stochastic_rounding);
  p.has_master = t.master != nullptr ? 1u : 0u;
  p.cols = static_cast<uint32_t>(core::has_row_factor(layout) ? layout.cols : 1);
  return p;
}

TensorJob job_of(const StepConstants& k, const luminav_tensor& t, const TensorGlobals& gl) {
  TensorJob job;
  job.num_elements = t.num_elements;
  job.index_offset = t.index_offset;
  job.param_dtype = t.param_dtype;
  job.grad_dtype = t.grad_dtype;
  job.layout = core::moment_layout(k.tdclm, t);
  job.param.host = t.param;
  job.grad.host = const_cast<void*>(t.grad);
  job.exp_avg.host = t.exp_avg;
  if (job.layout.kind == SecondMoment::kElementwise) job.exp_avg_sq.host = t.exp_avg_sq;
  job.master.host = t.master;
  job.params = step_params(core::element_constants(k, job.layout), gl, t, job.layout);
  return job;
}

// Tensors per submission: each chunk of each array may be one memory import,
// and drivers limit the allocations alive at once (maxMemoryAllocationCount,
// often 4096).
constexpr size_t kTensorsPerPass = 64;

// What luminav_step_groups_enqueue runs asynchronously here and what still
// falls back to the synchronous step (the last line of the backend's
// devices, so `luminamoon info` and luminav_backend_devices say it).
constexpr const char* kSynchronousOptions =
    "asynchronous step (luminav_step_groups_enqueue): CLM and TD-CLM (factored, row, tensor: the second moment "
    "formed on the device), any number of tensors in a call (one submission, one verdict), every option and dtype, "
    "masters, stochastic rounding, step_counter / lr / grad_scale / found_inf; synchronous fallback: a call whose "
    "arrays need more than half the device's memory allocations (maxMemoryAllocationCount), rows longer than one "
    "storage buffer";

// run_pass over `jobs` in batches of kTensorsPerPass.
int run_batched(Context& c, Pass pass, std::vector<TensorJob>& jobs, std::string* why) {
  for (size_t first = 0; first < jobs.size(); first += kTensorsPerPass) {
    const size_t count = std::min(kTensorsPerPass, jobs.size() - first);
    if (int code = run_pass(c, pass, std::span(jobs).subspan(first, count), why); code != LUMINAV_STATUS_OK) {
      return code;
    }
  }
  return LUMINAV_STATUS_OK;
}

class VulkanBackend final : public Backend {
 public:
  std::string_view name() const override { return "vulkan"; }
  int device_type() const override { return LUMINAV_DEVICE_CPU; }

  bool available(std::string* why_not) const override {
    std::string why;
    const bool ok = Context::get(&why) != nullptr;
    if (why_not) *why_not = ok ? std::string() : why;
    return ok;
  }
  std::string detail() const override {
    Context* c = Context::get(nullptr);
    return c ? c->device_name() : std::string();
  }
  // Note [Vulkan routing] in vulkan_context.cc.
  bool offload() const override {
    Context* c = Context::get(nullptr);
    return c != nullptr && c->auto_routed();
  }
  std::string devices() const override {
    std::string out;
    for (const DeviceReport& d : Context::devices()) {
      if (!out.empty()) out += "\n";
      out += d.name + " (" + d.type + ", Vulkan " + d.api + ")" + (d.chosen ? " [selected]" : "") + ": " + d.why;
    }
    if (!out.empty()) out += std::string("\n") + kSynchronousOptions;
    return out;
  }

  int reduce(const StepConstants& k, std::span<const luminav_tensor> tensors, int round,
             std::span<const TensorGlobals> globals, std::span<luminav_partials> out,
             const ExecContext&) override {
    Context* c = context();
    if (!c) return LUMINAV_STATUS_BACKEND_UNAVAILABLE;
    std::vector<TensorJob> jobs;
    std::vector<core::UpdatedFactors> factors(tensors.size());
    const bool grad_sums = core::round_has_grad_sums(round);
    const bool update_sums = core::round_has_update_sums(k, round);
    for (size_t j = 0; j < tensors.size(); ++j) {
      TensorJob job = job_of(k, tensors[j], globals[j]);
      job.params.want_grad_sums = grad_sums ? 1u : 0u;
      job.params.want_update_sums = update_sums ? 1u : 0u;
      if (core::has_row_factor(job.layout)) {
        job.row_sq = globals[j].row_sq_sums;
        job.col_sq = globals[j].col_sq_sums;
        if (update_sums) {
          core::update_factors(k, job.layout, tensors[j].exp_avg_sq, globals[j], factors[j]);
          job.row_factor = factors[j].row.data();
          job.col_over_rho = factors[j].col_over_rho.data();
        }
      }
      jobs.push_back(job);
    }
    std::string why;
    if (int code = run_batched(*c, Pass::kReduce, jobs, &why); code != LUMINAV_STATUS_OK) {
      set_backend_error("vulkan reduce on " + c->device_name() + ": " + why);
      return code;
    }
    for (size_t j = 0; j < tensors.size(); ++j) {
      out[j] = jobs[j].partials;
      if (grad_sums && core::has_row_factor(jobs[j].layout)) {
        out[j].row_count = jobs[j].layout.rows;
        out[j].row_factor_sum = core::row_factor_sum(k, jobs[j].layout, tensors[j].exp_avg_sq, globals[j].row_sq_sums);
      }
    }
    return LUMINAV_STATUS_OK;
  }

  int apply(const StepConstants& k, std::span<const luminav_tensor> tensors,
            std::span<const TensorGlobals> globals, const ExecContext&) override {
    Context* c = context();
    if (!c) return LUMINAV_STATUS_BACKEND_UNAVAILABLE;
    std::vector<TensorJob> jobs;
    std::vector<core::UpdatedFactors> factors(tensors.size());
    for (size_t j = 0; j < tensors.size(); ++j) {
      TensorJob job = job_of(k, tensors[j], globals[j]);
      if (core::has_row_factor(job.layout)) {
        core::update_factors(k, job.layout, tensors[j].exp_avg_sq, globals[j], factors[j]);
        job.row_factor = factors[j].row.data();
        job.col_over_rho = factors[j].col_over_rho.data();
      }
      jobs.push_back(job);
    }
    std::string why;
    if (int code = run_batched(*c, Pass::kApply, jobs, &why); code != LUMINAV_STATUS_OK) {
      set_backend_error("vulkan apply on " + c->device_name() + ": " + why);
      return code;
    }
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (jobs[j].layout.kind == SecondMoment::kTensor) tensors[j].exp_avg_sq[0] = globals[j].second_moment;
      if (core::has_row_factor(jobs[j].layout)) core::store_factors(jobs[j].layout, factors[j], tensors[j].exp_avg_sq);
    }
    return LUMINAV_STATUS_OK;
  }

  // Note [Vulkan asynchronous step] (vulkan_async.cc): CLM and TD-CLM (its
  // second moment formed on the device), any number of tensors within
  // async_allocation_budget (pass 1 of all, one verdict, pass 2 of all, in
  // one submission); the step counters
  // and found_inf are read and written on the device (Note [device step
  // counter]), lr and the gradient scale read now.
  int enqueue_host_step(std::span<const AsyncGroup> groups, const luminav_async& async, bool* enqueued) override {
    *enqueued = false;
    Context* c = context();
    if (!c) return LUMINAV_STATUS_BACKEND_UNAVAILABLE;
    size_t count = 0;
    bool supported = !groups.empty();
    for (const AsyncGroup& g : groups) {
      // lv_finalize.comp forms the tensor bound's factor only: the RMS clip runs synchronously.
      supported = supported && g.k.bound_mode != LUMINAV_BOUND_RMS;
      // A row longer than a storage buffer is refused by the synchronous pass, with its message.
      for (const luminav_tensor& t : g.tensors) {
        const MomentLayout layout = core::moment_layout(g.k.tdclm, t);
        supported = supported && (!core::has_row_factor(layout) || chunk_elements(*c, layout) > 0);
      }
      count += g.tensors.size();
    }
    std::string why;
    // The synchronous driver runs what the asynchronous step cannot: the steps in flight first.
    auto fall_back = [&]() {
      if (int code = synchronize_async_steps(*c, &why); code != LUMINAV_STATUS_OK) {
        set_backend_error("vulkan: " + why);
        return code;
      }
      return static_cast<int>(LUMINAV_STATUS_OK);
    };
    if (!supported) return fall_back();
    // Each group's constants as the host driver forms them, at step t.
    auto constants_at = [&async](const AsyncGroup& g, uint64_t step) {
      StepConstants k = g.k;
      double lr = g.lr_host;
      if (g.lr) {
        lr = g.lr_dtype == LUMINAV_SCALAR_F64 ? *static_cast<const double*>(g.lr)
                                               : static_cast<double>(*static_cast<const float*>(g.lr));
      }
      core::set_step_and_lr(k, g.beta1, g.beta2, lr, g.weight_decay, step);
      if (async.grad_scale) k.inv_grad_scale = core::inverse_grad_scale(*async.grad_scale);
      return k;
    };
    auto job_at = [](const StepConstants& k, const luminav_tensor& t) {
      TensorJob job = job_of(k, t, core::initial_globals(k, 0.0f));
      job.params.want_grad_sums = 1u;
      // TD-CLM's K and the norms read vhat: the factors mode asks for them (round 1).
      job.params.want_update_sums =
          core::needs_update_sums(k) && job.layout.kind == SecondMoment::kElementwise ? 1u : 0u;
      return job;
    };
    std::vector<AsyncTensor> tensors;
    std::vector<float*> counters;
    std::vector<std::pair<size_t, size_t>> origin;  // (group, tensor) of each AsyncTensor
    tensors.reserve(count);
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const AsyncGroup& g = groups[gi];
      const StepConstants k = constants_at(g, g.k.step);
      counters.push_back(g.step_counter);
      for (size_t j = 0; j < g.tensors.size(); ++j) {
        AsyncTensor t;
        t.job = job_at(k, g.tensors[j]);
        t.position = g.positions[j];
        t.check_finite = k.check_finite != 0;
        t.needs_reduce = core::reduction_rounds(k) > 0;
        t.group = static_cast<uint32_t>(gi);
        if (t.job.layout.kind != SecondMoment::kElementwise) t.factors = g.tensors[j].exp_avg_sq;
        tensors.push_back(t);
        origin.emplace_back(gi, j);
      }
    }
    if (async_step_allocations(*c, tensors) > async_allocation_budget(*c)) return fall_back();
    AsyncWords words;
    words.counters = counters;
    words.found_inf = async.found_inf;
    words.params_at_step = [&](size_t tensor, uint64_t step) {
      const AsyncGroup& g = groups[origin[tensor].first];
      return job_at(constants_at(g, step), g.tensors[origin[tensor].second]).params;
    };
    if (int code = enqueue_async_step(*c, tensors, words, async.skip_nonfinite != 0, async.status, &why);
        code != LUMINAV_STATUS_OK) {
      set_backend_error(code == LUMINAV_STATUS_NONFINITE_GRAD ? why : "vulkan step on " + c->device_name() + ": " + why);
      return code;
    }
    *enqueued = true;
    return LUMINAV_STATUS_OK;
  }

  int synchronize() override {
    if (!async_steps_used()) return LUMINAV_STATUS_OK;  // nothing can be in flight (and no probe)
    Context* c = Context::get(nullptr);
    if (!c) return LUMINAV_STATUS_OK;  // nothing can be in flight
    std::string why;
    if (int code = synchronize_async_steps(*c, &why); code != LUMINAV_STATUS_OK) {
      set_backend_error(code == LUMINAV_STATUS_NONFINITE_GRAD ? why : "vulkan synchronize: " + why);
      return code;
    }
    return LUMINAV_STATUS_OK;
  }

 private:
  static Context* context() {
    std::string why;
    Context* c = Context::get(&why);
    if (!c) set_backend_error("vulkan backend unavailable: " + why);
    return c;
  }
};

}  // namespace
}  // namespace vulkan

std::unique_ptr<Backend> make_vulkan_backend() { return std::make_unique<vulkan::VulkanBackend>(); }

}  // namespace luminav
