// StepPlan: the torch optimizer's whole step in one native call, with the
// parameters' and gradients' pointers read and checked here, not in Python.
//
// Note [step plan]: the Python front end describes the optimizer once (per
// device): every param group's dict, parameters and state tensors. The plan
// keeps the C descriptors (luminav_group / luminav_tensor) and, on each
// step, reads only what can change without the optimizer seeing it: each
// parameter's data pointer, each gradient (new tensors every step after
// zero_grad(set_to_none=True)) and the groups' numeric hyperparameters (an
// LR scheduler writes them). Anything else that changed (a parameter's
// storage, a missing gradient, a group's mode) makes step() answer
// kRebuild, and the front end describes the optimizer anew. Torch is reached
// only through its Python objects (attributes and methods, by vectorcall)
// and the C functions its tensor type publishes for DLPack (Note [tensor
// reads through DLPack]), so the extension does not link against libtorch.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "luminav/luminav.h"
#include "luminav/luminav_trace.h"
#include "python/tensor_exchange.h"

namespace nb = nanobind;
using luminamoon::python::TensorExchange;
using luminamoon::python::TensorFacts;

namespace {

constexpr int kRebuild = -1;  // step(): the description is stale

// (code, message, position): position is the flat index of the parameter
// the message is about (-1 when none).
using StepResult = std::tuple<int, std::string, int64_t>;

// Interned attribute and key names, created once.
struct Names {
  nb::object local_tensor;  // DTensor's local shard (Note [sharded plan])
  nb::object grad, data_ptr, numel, is_contiguous, contiguous, dtype, lr, betas, eps, weight_decay, tau, lam,
      bound_ratio;
  nb::object state_keys[4];  // step, exp_avg, exp_avg_sq, master
  static constexpr int kFixedKeys = 8;
  nb::object fixed_keys[kFixedKeys];  // group options a description fixes
  Names()
      : local_tensor(nb::str("_local_tensor")), grad(nb::str("grad")), data_ptr(nb::str("data_ptr")), numel(nb::str("numel")), is_contiguous(nb::str("is_contiguous")),
        contiguous(nb::str("contiguous")), dtype(nb::str("dtype")), lr(nb::str("lr")), betas(nb::str("betas")),
        eps(nb::str("eps")), weight_decay(nb::str("weight_decay")), tau(nb::str("tau")), lam(nb::str("lam")),
        bound_ratio(nb::str("bound_ratio")),
        state_keys{nb::str("step"), nb::str("exp_avg"), nb::str("exp_avg_sq"), nb::str("master")},
        fixed_keys{nb::str("mode"), nb::str("bound"), nb::str("cautious"), nb::str("check_finite"),
                   nb::str("stochastic_rounding"), nb::str("master_weights"), nb::str("backend"),
                   nb::str("td_factor")} {}
};

// LUMINAV_TRACE_HOST, as the CUDA backend reads it: once per process.
bool trace_host() {
  static const bool trace = std::getenv("LUMINAV_TRACE_HOST") != nullptr;
  return trace;
}

// Built at import (register_optim_step_plan), never lazily on a first
// step: a free-threaded thread waiting on a C++ static's guard would stay
// attached and could stall a stop-the-world pause of the thread building it.
const Names& names() {
  static const Names* n = new Names();  // lives as long as the interpreter
  return *n;
}

nb::object call_method0(nb::handle self, const nb::object& name) {
  PyObject* args[1] = {self.ptr()};
  PyObject* r = PyObject_VectorcallMethod(name.ptr(), args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

uintptr_t data_ptr_of(nb::handle tensor) { return nb::cast<uintptr_t>(call_method0(tensor, names().data_ptr)); }

// Note [sharded plan]: a DTensor (FSDP2's sharded parameter, its gradient
// and the state zeros_like made of it) is a wrapper without storage of its
// own; the plan reads its local shard, `_local_tensor` (what to_local()
// returns, without the autograd call), where the tensor has one.
nb::object local_of(nb::handle tensor) {
  PyObject* local = PyObject_GetAttr(tensor.ptr(), names().local_tensor.ptr());
  if (local == nullptr) {
    PyErr_Clear();
    return nb::borrow(tensor);
  }
  return nb::steal(local);
}

// A group's dict entry, borrowed (the dict keeps it alive).
nb::handle group_item(nb::handle group, const nb::object& key) {
  PyObject* v = PyDict_GetItemWithError(group.ptr(), key.ptr());
  if (v == nullptr) {
    if (PyErr_Occurred()) throw nb::python_error();
    throw nb::key_error(nb::borrow<nb::str>(key).c_str());
  }
  return v;
}

struct Entry {
  nb::object param;           // the parameter (its .grad is read each step)
  nb::object param_dtype;     // torch dtype object of the parameter
  nb::object state;           // its optimizer state dict
  nb::object state_values[4]; // the tensors described: step, exp_avg, exp_avg_sq, master (or None)
  uintptr_t param_ptr = 0;    // data pointer when described (of the local shard)
  int64_t position = 0;       // flat index in the optimizer (for messages)
  bool sharded = false;       // a DTensor parameter (Note [sharded plan])
};

uintptr_t ptr_or_zero(nb::handle tensor) { return tensor.is_none() ? 0 : data_ptr_of(local_of(tensor)); }

// True when the state dict still holds the tensors the entry describes
// (anyone may replace them: load_state_dict, a user's own code).
bool state_unchanged(const Entry& e) {
  for (int i = 0; i < 4; ++i) {
    PyObject* v = PyDict_GetItemWithError(e.state.ptr(), names().state_keys[i].ptr());
    if (v == nullptr && PyErr_Occurred()) throw nb::python_error();
    const PyObject* expected = e.state_values[i].is_none() ? nullptr : e.state_values[i].ptr();
    if (v != expected) return false;
  }
  return true;
}

struct Group {
  nb::object dict;              // the param group
  nb::object fixed[Names::kFixedKeys];  // its options when described (compared by identity)
  luminav_hyperparams hp{};
  std::vector<luminav_tensor> tensors;
  std::vector<Entry> entries;
  nb::object lr_tensor;         // the group's lr when it is a device tensor (else None)
  uintptr_t lr_ptr = 0;
  int lr_dtype = LUMINAV_SCALAR_F32;
  float* step_counter = nullptr;
};

// Note [one step at a time]: a plan belongs to one optimizer, whose step()
// is not meaningful from two threads at once (torch.optim makes the same
// assumption). step() reads and rewrites the descriptors while the native call
// that reads them runs without the GIL, so a second caller, possible with a GIL
// too, would tear them. Every method claims the plan; a caller that finds it
// claimed gets a RuntimeError instead of a torn step (Note [free-threaded
// bindings] in module.cc).
class PlanClaim {
 public:
  explicit PlanClaim(std::atomic<bool>& busy) : busy_(busy) {
    if (busy_.exchange(true, std::memory_order_acquire)) {
      throw std::runtime_error(
          "StepPlan: in use by another thread (one optimizer's step() must not run from two threads at once)");
    }
  }
  ~PlanClaim() { busy_.store(false, std::memory_order_release); }
  PlanClaim(const PlanClaim&) = delete;
  PlanClaim& operator=(const PlanClaim&) = delete;

 private:
  std::atomic<bool>& busy_;
};

class StepPlan {
 public:
  // `tensor_type` and `parameter_type` (torch.Tensor, torch.nn.Parameter;
  // None for neither) are the types whose tensors are read through DLPack's
  // exchange table (Note [tensor reads through DLPack]).
  StepPlan(std::string backend, int device_type, int device_index, nb::handle tensor_type,
           nb::handle parameter_type)
      : backend_(std::move(backend)), exchange_(tensor_type, parameter_type) {
    options_.device_type = device_type;
    options_.device_index = device_index;
  }

  // Note [the GIL in a step]: the native call releases the GIL, so that
  // other Python threads (a data loader's, the caller's own) run while a
  // host step computes or a device step enqueues. On the H200 loop, right
  // after a backward pass, getting it back took ~1 us and a step with the
  // GIL kept was no faster (docs/benchmarks.md, "Issue 13 (session 4,
  // lead)"); `release_gil` exists for that comparison
  // (bench/optim_host_profile.py).
  bool release_gil() const { return release_gil_; }
  void set_release_gil(bool release) {
    PlanClaim claim(busy_);
    release_gil_ = release;
  }

  // One group: its dict, hyperparameters (the fields step() does not
  // refresh: modes and flags), its fp32 step counter (one 0-d tensor shared
  // by the group's state dicts, host or device memory like the tensors), its
  // lr tensor where the device reads it, and per parameter a tuple
  // (param, param dtype object, state dict, position, dtype code, seed, rows,
  // td_factor code), and for a sharded (DTensor) parameter also
  // (index_offset, logical elements, logical rows); the
  // state dict holds "exp_avg", "exp_avg_sq" and maybe "master", already
  // validated by the front end.
  void add_group(nb::object dict, const luminav_hyperparams& hp, nb::list tensors, nb::object step,
                 nb::object lr_tensor, int lr_dtype) {
    PlanClaim claim(busy_);
    Group g;
    g.dict = std::move(dict);
    for (int i = 0; i < Names::kFixedKeys; ++i) g.fixed[i] = nb::borrow(group_item(g.dict, names().fixed_keys[i]));
    g.hp = hp;
    g.step_counter = reinterpret_cast<float*>(data_ptr_of(step));
    g.lr_ptr = lr_tensor.is_none() ? 0 : data_ptr_of(lr_tensor);
    g.lr_tensor = std::move(lr_tensor);
    g.lr_dtype = lr_dtype;
    for (nb::handle item : tensors) {
      auto t = nb::cast<nb::tuple>(item);
      Entry e;
      e.param = nb::borrow(t[0]);
      e.param_dtype = nb::borrow(t[1]);
      e.state = nb::borrow(t[2]);
      e.position = nb::cast<int64_t>(t[3]);
      e.sharded = t.size() > 8;
      nb::object local = e.sharded ? local_of(e.param) : e.param;
      e.param_ptr = data_ptr_of(local);
      for (int i = 0; i < 4; ++i) {
        PyObject* v = PyDict_GetItemWithError(e.state.ptr(), names().state_keys[i].ptr());
        if (v == nullptr && PyErr_Occurred()) throw nb::python_error();
        e.state_values[i] = v ? nb::borrow(v) : nb::none();
      }
      if (!e.state_values[0].is(step)) throw nb::value_error("state['step'] is not the group's step counter");
      luminav_tensor d{};
      d.param = reinterpret_cast<void*>(e.param_ptr);
      d.exp_avg = reinterpret_cast<float*>(ptr_or_zero(e.state_values[1]));
      d.exp_avg_sq = reinterpret_cast<float*>(ptr_or_zero(e.state_values[2]));
      d.master = reinterpret_cast<float*>(ptr_or_zero(e.state_values[3]));
      d.num_elements = nb::cast<size_t>(call_method0(local, names().numel));
      d.param_dtype = nb::cast<int>(t[4]);
      d.seed = nb::cast<uint64_t>(t[5]);
      d.rows = nb::cast<uint64_t>(t[6]);
      d.td_factor = nb::cast<int>(t[7]);
      d.grad_dtype = d.param_dtype;  // torch gives a gradient its parameter's dtype
      if (e.sharded) {
        d.index_offset = nb::cast<uint64_t>(t[8]);
        shards_.push_back({nb::cast<uint64_t>(t[9]), nb::cast<uint64_t>(t[10])});
      } else {
        shards_.push_back({d.num_elements, d.rows});  // a whole tensor is its own shard
      }
      sharded_ = sharded_ || e.sharded;
      g.tensors.push_back(d);
      g.entries.push_back(std::move(e));
    }
    groups_.push_back(std::move(g));
  }

  // Parameters without a gradient when described: a gradient appearing on
  // one makes the description stale.
  void add_excluded(nb::list params) {
    PlanClaim claim(busy_);
    for (nb::handle p : params) excluded_.push_back(nb::borrow(p));
  }

  void set_async(uintptr_t status, uintptr_t host_status, uintptr_t workspace, size_t workspace_bytes) {
    PlanClaim claim(busy_);
    status_ = reinterpret_cast<luminav_step_status*>(status);
    host_status_ = reinterpret_cast<luminav_step_status*>(host_status);
    options_.scratch = reinterpret_cast<void*>(workspace);
    options_.scratch_bytes = workspace_bytes;
  }

  size_t workspace_bytes() const {
    PlanClaim claim(busy_);
    std::vector<luminav_group> c = c_groups();
    if (sharded_) return luminav_sharded_workspace_bytes(c.data(), c.size(), shards_.data());
    return luminav_groups_workspace_bytes(c.data(), c.size());
  }

  // Sharded plans: float64s of the exchange buffer, and the exchanges of a step.
  size_t exchange_doubles() const {
    std::vector<luminav_group> c = c_groups();
    return luminav_sharded_exchange_doubles(c.data(), c.size(), shards_.data());
  }
  int exchanges() const {
    std::vector<luminav_group> c = c_groups();
    return luminav_sharded_exchanges(c.data(), c.size());
  }
  bool sharded() const { return sharded_; }
  bool reads_through_dlpack() const { return exchange_.usable(); }

  // One step. Reads the gradients and refreshes the pointers and numeric
  // hyperparameters, then one luminav_step_groups call with the GIL released.
  StepResult step(uintptr_t stream, uintptr_t grad_scale, uintptr_t found_inf, bool skip_nonfinite) {
    PlanClaim claim(busy_);
    if (!trace_host()) {
      if (StepResult r = refresh(); std::get<0>(r) != 0) return r;
      return call(stream, grad_scale, found_inf, skip_nonfinite, -1, 0);
    }
    // Where the host time of a step goes (bench/optim_host_profile.py):
    // timed first, written after (Note [host trace]).
    using clock = std::chrono::steady_clock;
    using us = std::chrono::duration<double, std::micro>;
    const auto start = clock::now();
    StepResult r = refresh();
    const auto refreshed = clock::now();
    const bool refreshed_ok = std::get<0>(r) == 0;
    if (refreshed_ok) r = call(stream, grad_scale, found_inf, skip_nonfinite, -1, 0);
    const auto called = clock::now();
    last_trace_.clear();
    last_trace_.emplace_back("plan refresh", us(refreshed - start).count());
    if (!refreshed_ok) return r;
    last_trace_.emplace_back("native call", us(called - refreshed).count());
    const char* labels[kTraceStages];
    double stage_us[kTraceStages];
    const size_t stages = std::min(luminav_host_trace(labels, stage_us, kTraceStages), kTraceStages);
    std::string line;
    char buffer[96];
    for (size_t i = 0; i < stages; ++i) {
      last_trace_.emplace_back(labels[i], stage_us[i]);
      std::snprintf(buffer, sizeof buffer, "%s%s %.1f", i == 0 ? " [" : ", ", labels[i], stage_us[i]);
      line += buffer;
    }
    if (stages > 0) line += "]";
    std::fprintf(stderr, "luminav: plan refresh %.1f us (%zu tensors), native call %.1f us%s\n",
                 last_trace_[0].second, tensor_count(), last_trace_[1].second, line.c_str());
    return r;
  }

  // The last traced step's host stages (LUMINAV_TRACE_HOST): (name, us)
  // pairs, the plan's refresh and native call, then the library's stages
  // inside the native call (Note [host trace]). Empty when not tracing.
  std::vector<std::pair<std::string, double>> last_trace() const {
    PlanClaim claim(busy_);
    return last_trace_;
  }

  // One phase of a sharded step (luminav_step_groups_sharded); phase 0
  // refreshes the pointers, later phases run on what phase 0 read.
  StepResult step_sharded(uintptr_t stream, uintptr_t grad_scale, uintptr_t found_inf, bool skip_nonfinite,
                          int phase, uintptr_t exchange) {
    PlanClaim claim(busy_);
    if (phase == 0) {
      if (StepResult r = refresh(); std::get<0>(r) != 0) return r;
    }
    return call(stream, grad_scale, found_inf, skip_nonfinite, phase, exchange);
  }

 private:
  StepResult refresh() {
    const Names& n = names();
    dense_grads_.clear();
    for (const nb::object& p : excluded_) {
      nb::object grad = nb::steal(PyObject_GetAttr(p.ptr(), n.grad.ptr()));
      if (!grad.is_valid()) throw nb::python_error();
      if (!grad.is_none()) return {kRebuild, "a gradient appeared", -1};
    }
    for (Group& g : groups_) {
      if (StepResult r = refresh_hyperparams(g); std::get<0>(r) != 0) return r;
      for (size_t i = 0; i < g.entries.size(); ++i) {
        if (StepResult r = refresh_entry(g.entries[i], g.tensors[i]); std::get<0>(r) != 0) return r;
      }
    }
    return {0, std::string(), -1};
  }

  // One parameter: its storage and state as described, its gradient's
  // pointer read. Plain tensors are read through DLPack's table, anything
  // else (a DTensor, a subclass, an older torch) through torch's methods.
  StepResult refresh_entry(const Entry& e, luminav_tensor& d) {
    const Names& n = names();
    TensorFacts facts;
    if (!e.sharded && exchange_.read(e.param, &facts)) {
      // A .data swap to a view of the same storage keeps the pointer: its
      // dtype or size tells.
      if (facts.data != e.param_ptr || facts.dtype != d.param_dtype || facts.num_elements != d.num_elements) {
        return {kRebuild, "parameter storage changed", e.position};
      }
    } else if (data_ptr_of(e.sharded ? local_of(e.param) : e.param) != e.param_ptr) {
      return {kRebuild, "parameter storage changed", e.position};
    }
    if (!state_unchanged(e)) return {kRebuild, "state replaced", e.position};
    nb::object grad = nb::steal(PyObject_GetAttr(e.param.ptr(), n.grad.ptr()));
    if (!grad.is_valid()) throw nb::python_error();
    if (grad.is_none()) return {kRebuild, "gradient missing", e.position};
    if (e.sharded) {
      grad = local_of(grad);
    } else if (exchange_.read(grad, &facts)) {
      // torch checks a .grad's dtype, size and device when it is set, not
      // when its .data is replaced later: each is checked again here.
      if (facts.dtype != d.param_dtype) {
        return {LUMINAV_STATUS_INVALID_ARGUMENT, "the gradient's dtype differs from the parameter's", e.position};
      }
      if (facts.num_elements != d.num_elements) {
        return {LUMINAV_STATUS_INVALID_ARGUMENT,
                "the gradient has " + std::to_string(facts.num_elements) + " elements, the parameter " +
                    std::to_string(d.num_elements),
                e.position};
      }
      if (facts.device_type != options_.device_type ||
          (facts.device_type != LUMINAV_DEVICE_CPU && facts.device_id != options_.device_index)) {
        return {LUMINAV_STATUS_INVALID_ARGUMENT, "the gradient is on another device than the parameter",
                e.position};
      }
      if (facts.contiguous) {
        d.grad = reinterpret_cast<const void*>(facts.data);
        return {0, std::string(), -1};
      }
    }
    bool contiguous = false;
    try {
      contiguous = nb::handle(call_method0(grad, n.is_contiguous)).is(Py_True);
    } catch (nb::python_error&) {  // a sparse gradient has no strides
      return {LUMINAV_STATUS_INVALID_ARGUMENT, "LuminaV does not support sparse gradients", e.position};
    }
    if (!contiguous) {
      grad = call_method0(grad, n.contiguous);  // read-only: a dense copy is as good
      dense_grads_.push_back(grad);
    }
    // torch refuses a .grad of another dtype, size or device, and a
    // sparse .grad has no strides: the dtype check covers .data swaps.
    nb::object dtype = nb::steal(PyObject_GetAttr(grad.ptr(), n.dtype.ptr()));
    if (!dtype.is(e.param_dtype)) {
      return {LUMINAV_STATUS_INVALID_ARGUMENT, "the gradient's dtype differs from the parameter's", e.position};
    }
    d.grad = reinterpret_cast<const void*>(data_ptr_of(grad));
    return {0, std::string(), -1};
  }

  StepResult call(uintptr_t stream, uintptr_t grad_scale, uintptr_t found_inf, bool skip_nonfinite, int phase,
                  uintptr_t exchange) {
    std::vector<luminav_group>& c = call_groups_;  // reused: no allocation per step
    c_groups(c);
    options_.backend = backend_.c_str();
    options_.stream = reinterpret_cast<void*>(stream);
    luminav_async async{};
    async.status = status_;
    async.host_status = host_status_;
    async.grad_scale = reinterpret_cast<const float*>(grad_scale);
    async.found_inf = reinterpret_cast<float*>(found_inf);
    async.skip_nonfinite = skip_nonfinite ? 1 : 0;
    auto run = [&] {
      return phase < 0 ? luminav_step_groups(c.data(), c.size(), &options_, status_ ? &async : nullptr)
                       : luminav_step_groups_sharded(c.data(), c.size(), shards_.data(), &options_,
                                                     status_ ? &async : nullptr, phase,
                                                     reinterpret_cast<double*>(exchange));
    };
    int status;
    if (release_gil_) {
      nb::gil_scoped_release release;
      status = run();
    } else {
      status = run();
    }
    std::string message = status == LUMINAV_STATUS_OK ? std::string() : luminav_last_error_message();
    return {status, std::move(message), -1};
  }


 public:
  size_t num_tensors() const {
    PlanClaim claim(busy_);
    return tensor_count();
  }

  // Flat position (as given in add_group) of the tensor at call position `p`.
  int64_t position_of(size_t p) const {
    PlanClaim claim(busy_);
    for (const Group& g : groups_) {
      if (p < g.entries.size()) return g.entries[p].position;
      p -= g.entries.size();
    }
    return -1;
  }

 private:
  size_t tensor_count() const {
    size_t count = 0;
    for (const Group& g : groups_) count += g.tensors.size();
    return count;
  }

  std::vector<luminav_group> c_groups() const {
    std::vector<luminav_group> c;
    c_groups(c);
    return c;
  }
  void c_groups(std::vector<luminav_group>& c) const {
    c.resize(groups_.size());
    for (size_t i = 0; i < groups_.size(); ++i) {
      const Group& g = groups_[i];
      c[i].hp = &g.hp;
      c[i].tensors = g.tensors.data();
      c[i].count = g.tensors.size();
      c[i].step_counter = g.step_counter;
      c[i].lr = g.lr_ptr ? reinterpret_cast<const void*>(g.lr_ptr) : nullptr;
      c[i].lr_dtype = g.lr_dtype;
    }
  }

  // The numbers torch optimizers re-read from the group on every step.
  StepResult refresh_hyperparams(Group& g) {
    const Names& n = names();
    nb::handle d = g.dict;
    for (int i = 0; i < Names::kFixedKeys; ++i) {
      if (!group_item(d, n.fixed_keys[i]).is(g.fixed[i])) return {kRebuild, "a group option changed", -1};
    }
    nb::handle lr = group_item(d, n.lr);
    if (g.lr_ptr != 0) {
      if (!lr.is(g.lr_tensor)) return {kRebuild, "lr replaced", -1};
    } else {
      // A float, or a tensor this device does not read in place (a CPU
      // tensor for a CUDA step, any tensor on the host): its value now.
      nb::object value = nb::steal(PyNumber_Float(lr.ptr()));
      if (!value.is_valid()) throw nb::python_error();
      g.hp.lr = PyFloat_AsDouble(value.ptr());
    }
    nb::handle betas = group_item(d, n.betas);
    g.hp.beta1 = nb::cast<double>(betas[0]);
    g.hp.beta2 = nb::cast<double>(betas[1]);
    g.hp.eps = nb::cast<double>(group_item(d, n.eps));
    g.hp.weight_decay = nb::cast<double>(group_item(d, n.weight_decay));
    g.hp.tau = nb::cast<double>(group_item(d, n.tau));
    g.hp.lam = nb::cast<double>(group_item(d, n.lam));
    nb::handle ratio = group_item(d, n.bound_ratio);
    g.hp.bound_ratio = ratio.is_none() ? 0.0 : nb::cast<double>(ratio);
    if (PyErr_Occurred()) throw nb::python_error();
    return {0, std::string(), -1};
  }

  std::string backend_;
  luminav_options options_{};
  luminav_step_status* status_ = nullptr;
  luminav_step_status* host_status_ = nullptr;
  std::vector<Group> groups_;
  std::vector<nb::object> excluded_;
  std::vector<luminav_shard_layout> shards_;  // one per tensor of the call
  bool sharded_ = false;
  bool release_gil_ = true;  // Note [the GIL in a step]
  TensorExchange exchange_;  // Note [tensor reads through DLPack]
  static constexpr size_t kTraceStages = 16;
  std::vector<std::pair<std::string, double>> last_trace_;  // the last traced step
  std::vector<luminav_group> call_groups_;  // the C groups of a call, rewritten each step
  std::vector<nb::object> dense_grads_;  // contiguous copies, alive until the step's last phase is enqueued
  mutable std::atomic<bool> busy_{false};  // Note [one step at a time]
};

}  // namespace

void register_optim_step_plan(nb::module_& m) {
  names();
  trace_host();  // both statics made at import (see names())
  m.attr("PLAN_REBUILD") = kRebuild;
  m.attr("VERDICT_FOUND_INF") = static_cast<uint64_t>(LUMINAV_VERDICT_FOUND_INF);
  nb::class_<StepPlan>(m, "StepPlan", "The optimizer's whole step as one native call (Note [step plan])")
      .def(nb::init<std::string, int, int, nb::handle, nb::handle>(), nb::arg("backend"), nb::arg("device_type"),
           nb::arg("device_index"), nb::arg("tensor_type").none() = nb::none(),
           nb::arg("parameter_type").none() = nb::none())
      .def("add_group", &StepPlan::add_group, nb::arg("group"), nb::arg("hp"), nb::arg("tensors"),
           nb::arg("step"), nb::arg("lr_tensor").none(), nb::arg("lr_dtype"))
      .def("add_excluded", &StepPlan::add_excluded, nb::arg("params"))
      .def("set_async", &StepPlan::set_async, nb::arg("status"), nb::arg("host_status"), nb::arg("workspace"),
           nb::arg("workspace_bytes"))
      .def("workspace_bytes", &StepPlan::workspace_bytes)
      .def("exchange_doubles", &StepPlan::exchange_doubles)
      .def("exchanges", &StepPlan::exchanges)
      .def_prop_ro("sharded", &StepPlan::sharded)
      .def_prop_ro("reads_through_dlpack", &StepPlan::reads_through_dlpack,
                   "Whether tensors are read through DLPack's exchange table (Note [tensor reads through DLPack])")
      .def_prop_rw("release_gil", &StepPlan::release_gil, &StepPlan::set_release_gil,
                   "Whether the native call releases the GIL (Note [the GIL in a step]; on by default)")
      .def("step_sharded", &StepPlan::step_sharded, nb::arg("stream"), nb::arg("grad_scale"), nb::arg("found_inf"),
           nb::arg("skip_nonfinite"), nb::arg("phase"), nb::arg("exchange"),
           "One phase of a sharded step (luminav_step_groups_sharded); returns (code, message, position).")
      .def_prop_ro("last_trace", &StepPlan::last_trace,
                   "The last traced step's host stages, (name, microseconds) pairs (LUMINAV_TRACE_HOST)")
      .def("num_tensors", &StepPlan::num_tensors)
      .def("position_of", &StepPlan::position_of)
      .def("step", &StepPlan::step, nb::arg("stream"), nb::arg("grad_scale"), nb::arg("found_inf"),
           nb::arg("skip_nonfinite"),
           "One step; returns (code, message, position): 0 ok, a luminav status, or PLAN_REBUILD.");
}
