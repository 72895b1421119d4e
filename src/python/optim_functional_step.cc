// The functional step (luminamoon.optim.step) in one native call: argument
// checks, buffer access and the C call, so that a small step costs a few
// microseconds of Python (issue 22: under the free-threaded interpreter the
// former Python checks, ~75 us a call without specialization, kept two
// threads from scaling).
//
// Note [functional step checks]: the checks and their order are those the
// Python front end had (python/luminamoon/optim/functional.py documents the
// errors): describe param, grad, exp_avg; element counts; td_factor; rows;
// exp_avg_sq and its length; master; one device; no overlap; seed; the
// hyperparameter conversions; the backend name. A NumPy array is read here
// through the buffer protocol when it is plainly usable (a float32/float16/
// uint16 format of native byte order, C-contiguous, writable where written);
// anything else (torch tensors, ml_dtypes.bfloat16, or an array that is
// refused) goes to the Python describer functional.describe_buffer, which
// either describes it or raises the error with its message. So each buffer
// message is written once, in Python, and the fast path never decides
// against an input that Python would accept.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "luminav/luminav.h"

namespace nb = nanobind;

namespace {

[[noreturn]] void throw_current() { throw nb::python_error(); }

std::string str_of(nb::handle value) { return nb::cast<std::string>(nb::str(value)); }
std::string repr_of(nb::handle value) { return nb::cast<std::string>(nb::repr(value)); }

// Python's float(value).
double to_double(nb::handle value) {
  if (PyFloat_Check(value.ptr())) return PyFloat_AsDouble(value.ptr());
  nb::object f = nb::steal(PyNumber_Float(value.ptr()));
  if (!f.is_valid()) throw_current();
  return PyFloat_AsDouble(f.ptr());
}

// Python's int(value), then whether it lies in [0, 2**64) (nullopt when not).
// Errors of int() itself (a string that is no number, None) propagate.
std::optional<uint64_t> to_uint64(nb::handle value) {
  nb::object owned;
  PyObject* integer = value.ptr();
  if (!PyLong_Check(integer)) {
    owned = nb::steal(PyNumber_Long(integer));
    if (!owned.is_valid()) throw_current();
    integer = owned.ptr();
  }
  const unsigned long long u = PyLong_AsUnsignedLongLong(integer);
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();  // negative or >= 2**64: an OverflowError here
    return std::nullopt;
  }
  return static_cast<uint64_t>(u);
}

// Python's int(value) for the C struct's int fields.
int to_int(nb::handle value) {
  nb::object owned;
  PyObject* integer = value.ptr();
  if (!PyLong_Check(integer)) {
    owned = nb::steal(PyNumber_Long(integer));
    if (!owned.is_valid()) throw_current();
    integer = owned.ptr();
  }
  const long v = PyLong_AsLong(integer);
  if (v == -1 && PyErr_Occurred()) throw_current();
  if (v < INT32_MIN || v > INT32_MAX) throw nb::type_error(("expected a C int, got " + str_of(value)).c_str());
  return static_cast<int>(v);
}

int truth(nb::handle value) {
  const int t = PyObject_IsTrue(value.ptr());
  if (t < 0) throw_current();
  return t;
}

bool equals(nb::handle value, long number) {
  nb::object n = nb::steal(PyLong_FromLong(number));
  const int eq = PyObject_RichCompareBool(value.ptr(), n.ptr(), Py_EQ);
  if (eq < 0) throw_current();
  return eq == 1;
}

// The C struct from Python values, as functional.make_hyperparams documents
// (ranges are the C library's to check; only t's range is checked here,
// since the struct cannot hold a negative or huge step).
luminav_hyperparams hyperparams_from(nb::handle lr, nb::handle beta1, nb::handle beta2, nb::handle eps,
                                     nb::handle weight_decay, nb::handle tau, nb::handle lam,
                                     nb::handle buffer_mode, nb::handle cautious, nb::handle bound_mode,
                                     nb::handle bound_ratio, nb::handle step, nb::handle check_finite,
                                     nb::handle stochastic_rounding, nb::handle grad_scale) {
  const std::optional<uint64_t> t = to_uint64(step);
  if (!t) throw nb::value_error(("step = " + str_of(step) + ": the step number t must be >= 1").c_str());
  luminav_hyperparams hp{};
  luminav_hyperparams_init(&hp);
  hp.lr = to_double(lr);
  hp.beta1 = to_double(beta1);
  hp.beta2 = to_double(beta2);
  hp.eps = to_double(eps);
  hp.weight_decay = to_double(weight_decay);
  hp.tau = to_double(tau);
  hp.lam = to_double(lam);
  hp.bound_ratio = to_double(bound_ratio);
  hp.buffer_mode = to_int(buffer_mode);
  hp.cautious = truth(cautious);
  hp.bound_mode = to_int(bound_mode);
  hp.check_finite = truth(check_finite);
  hp.stochastic_rounding = truth(stochastic_rounding);
  hp.step = *t;
  hp.grad_scale = to_double(grad_scale);
  return hp;
}

// The td_factor names of functional.step, in the order its message lists them.
constexpr struct {
  const char* name;
  int code;
} kTdFactors[] = {{"factored", LUMINAV_TD_FACTORED}, {"row", LUMINAV_TD_ROW}, {"tensor", LUMINAV_TD_TENSOR}};

int td_factor_code(nb::handle td_factor) {
  if (PyUnicode_Check(td_factor.ptr())) {
    for (const auto& f : kTdFactors) {
      if (PyUnicode_CompareWithASCIIString(td_factor.ptr(), f.name) == 0) return f.code;
    }
  }
  throw nb::value_error(("td_factor = " + repr_of(td_factor) + ": must be one of factored, row, tensor").c_str());
}

// What the Python front end registers once, at import
// (functional._NATIVE_HOOKS, set_functional_hooks): the NumPy array type, the
// Python describer and its dtype sets, and the torch CUDA stream lookup.
//
// Note [hooks registered once]: the hooks used to be an argument of every
// call. Under the free-threaded interpreter that made every step, on every
// thread, increment and decrement the reference count of one shared tuple
// (LOAD_GLOBAL, then the call's cleanup): an atomic on a cache line that
// bounces between the cores each call (issue 22, session 4). Registered here,
// the tuple is held for the life of the process (never released: a step on
// another thread may be reading it) and a call touches no shared mutable
// Python object.
struct Hooks {
  nb::handle ndarray, describe, float_dtypes, f32_only, cuda_stream;
};

std::atomic<const Hooks*> registered_hooks{nullptr};

void set_functional_hooks(nb::handle tuple) {
  if (!PyTuple_Check(tuple.ptr()) || PyTuple_Size(tuple.ptr()) != 5)
    throw nb::type_error("hooks: expected a 5-tuple");
  // Leaked on purpose with the tuple (a later registration, e.g. a reload of
  // functional.py, leaves the earlier one valid for calls still using it).
  auto* hooks = new Hooks{PyTuple_GetItem(tuple.ptr(), 0), PyTuple_GetItem(tuple.ptr(), 1),
                          PyTuple_GetItem(tuple.ptr(), 2), PyTuple_GetItem(tuple.ptr(), 3),
                          PyTuple_GetItem(tuple.ptr(), 4)};
  tuple.inc_ref();
  registered_hooks.store(hooks, std::memory_order_release);
}

const Hooks& hooks_of_front_end() {
  const Hooks* hooks = registered_hooks.load(std::memory_order_acquire);
  if (hooks == nullptr) {
    throw nb::type_error("functional_step: no hooks registered (luminamoon.optim.functional registers them "
                         "at import; call luminamoon.optim.step)");
  }
  return *hooks;
}

// One validated buffer: where it lives and what it holds (functional.Buffer).
struct Described {
  const char* name = "";
  uintptr_t ptr = 0;
  size_t numel = 0;
  size_t nbytes = 0;
  int dtype = LUMINAV_DTYPE_F32;
  int device_type = LUMINAV_DEVICE_CPU;
  int device_index = 0;
  std::string device_label = "cpu";
  uint64_t rows = 1;  // R of a parameter: its first dimension, 1 for 0-D (functional.rows_of)
  Py_buffer view{};
  bool has_view = false;

  Described() = default;
  Described(const Described&) = delete;
  Described& operator=(const Described&) = delete;
  ~Described() {
    if (has_view) PyBuffer_Release(&view);
  }
};

// The dtype of a NumPy buffer format this fast path takes (native byte order
// only; "H" is bf16 as uint16 bit patterns), or -1.
int dtype_of_format(const char* format, bool floats) {
  if (format == nullptr) return -1;
  if (std::strcmp(format, "f") == 0) return LUMINAV_DTYPE_F32;
  if (!floats) return -1;
  if (std::strcmp(format, "e") == 0) return LUMINAV_DTYPE_F16;
  if (std::strcmp(format, "H") == 0) return LUMINAV_DTYPE_BF16;
  return -1;
}

// The NumPy fast path: true when `obj` was described from its buffer.
bool describe_numpy(nb::handle obj, const Hooks& hooks, bool floats, bool writable, Described& out) {
  const int is_array = PyObject_IsInstance(obj.ptr(), hooks.ndarray.ptr());
  if (is_array < 0) throw_current();
  if (is_array == 0) return false;
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &out.view, flags) != 0) {
    PyErr_Clear();  // refused (read-only, strided, an unusual dtype): the Python describer says why
    return false;
  }
  out.has_view = true;
  const int dtype = dtype_of_format(out.view.format, floats);
  if (dtype < 0 || out.view.itemsize <= 0) {
    PyBuffer_Release(&out.view);
    out.has_view = false;
    return false;
  }
  out.dtype = dtype;
  out.numel = static_cast<size_t>(out.view.len / out.view.itemsize);
  out.nbytes = static_cast<size_t>(out.view.len);
  out.ptr = out.numel ? reinterpret_cast<uintptr_t>(out.view.buf) : 0;
  out.rows = out.view.ndim > 0 ? static_cast<uint64_t>(out.view.shape[0]) : 1;
  return true;
}

void describe(nb::handle obj, const char* name, const Hooks& hooks, bool floats, bool writable,
              Described& out) {
  out.name = name;
  if (describe_numpy(obj, hooks, floats, writable, out)) return;
  // functional.describe_buffer(obj, name, allowed, writable=...) -> Buffer, or it raises.
  nb::object b = hooks.describe(obj, name, floats ? hooks.float_dtypes : hooks.f32_only,
                                nb::arg("writable") = writable);
  out.ptr = nb::cast<uintptr_t>(b[1]);
  out.numel = nb::cast<size_t>(b[2]);
  out.nbytes = nb::cast<size_t>(b[3]);
  out.dtype = nb::cast<int>(b[4]);
  out.device_type = nb::cast<int>(b[5]);
  out.device_index = nb::cast<int>(b[6]);
  out.device_label = nb::cast<std::string>(b[7]);
  nb::object shape = nb::getattr(obj, "shape", nb::tuple());
  out.rows = nb::len(shape) ? nb::cast<uint64_t>(shape[0]) : 1;
}

void check_same_count(const Described& b, const Described& p) {
  if (b.numel != p.numel) {
    throw nb::value_error((std::string(b.name) + " has " + std::to_string(b.numel) + " elements but param has " +
                           std::to_string(p.numel)).c_str());
  }
}

// Every buffer on one device (as the C API demands; messages as before).
void check_one_device(const Described* const* buffers, size_t count) {
  for (size_t i = 1; i < count; ++i) {
    if (buffers[i]->device_label != buffers[0]->device_label) {
      std::string message = "all buffers must be on one device, got ";
      for (size_t j = 0; j < count; ++j) {
        if (j) message += ", ";
        message += std::string(buffers[j]->name) + " on " + buffers[j]->device_label;
      }
      throw nb::value_error(message.c_str());
    }
  }
}

// Refuses aliasing: no two buffers of one call may share a byte. Note
// [overlap sweep]: sorted by start address (stably, so that equal starts
// keep the argument order the message names), a buffer overlaps an earlier
// one iff it starts before the furthest end seen so far.
void check_no_overlap(const Described* const* buffers, size_t count) {
  const Described* ranges[5];
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    if (buffers[i]->nbytes) ranges[n++] = buffers[i];
  }
  std::stable_sort(ranges, ranges + n, [](const Described* a, const Described* b) { return a->ptr < b->ptr; });
  const Described* furthest = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Described* b = ranges[i];
    if (furthest != nullptr && b->ptr < furthest->ptr + furthest->nbytes) {
      throw nb::value_error((std::string(furthest->name) + " and " + b->name +
                             " overlap in memory (aliasing); every buffer of a step must be separate").c_str());
    }
    if (furthest == nullptr || b->ptr + b->nbytes > furthest->ptr + furthest->nbytes) furthest = b;
  }
}

// Note [arrays in flight]: the arrays of every step luminav_step_groups_enqueue
// took, held until luminamoon.optim.synchronize() has waited for the steps
// (a step may run after optim.step returned; freeing an array meanwhile would
// let the device write freed memory). Never destroyed: the interpreter's
// teardown must not free arrays of steps still in flight (the library waits
// for them at exit).
nb::list& arrays_in_flight() {
  static nb::list* held = new nb::list();
  return *held;
}

// luminamoon.optim.synchronize's body: waits for the steps in flight, then
// lets their arrays go; None, or (status, message) for a failure they found.
nb::object synchronize_steps(const std::string& backend) {
  luminav_options o{};
  o.backend = backend.c_str();
  int status;
  {
    nb::gil_scoped_release release;
    status = luminav_synchronize(&o);
  }
  arrays_in_flight().clear();
  if (status == LUMINAV_STATUS_OK) return nb::none();
  return nb::make_tuple(status, std::string(luminav_last_error_message()));
}

// luminamoon.optim.step's body (the Python function only forwards its
// arguments): None on success, else (status, message) for raise_for_status.
nb::object functional_step(nb::handle param, nb::handle grad, nb::handle exp_avg, nb::handle exp_avg_sq,
                           nb::handle master, nb::handle lr, nb::handle beta1, nb::handle beta2, nb::handle eps,
                           nb::handle weight_decay, nb::handle tau, nb::handle lam, nb::handle buffer_mode,
                           nb::handle cautious, nb::handle bound_mode, nb::handle bound_ratio, nb::handle step,
                           nb::handle seed, nb::handle check_finite, nb::handle stochastic_rounding,
                           nb::handle backend, nb::handle td_factor, nb::handle rows, nb::handle grad_scale,
                           bool asynchronous) {
  const Hooks& hooks = hooks_of_front_end();
  Described p, g, m, v, w;
  describe(param, "param", hooks, true, true, p);
  describe(grad, "grad", hooks, true, false, g);
  describe(exp_avg, "exp_avg", hooks, false, true, m);
  check_same_count(g, p);
  check_same_count(m, p);
  const int td_code = td_factor_code(td_factor);
  uint64_t n_rows = p.rows;
  if (!rows.is_none()) {
    const std::optional<uint64_t> r = to_uint64(rows);
    if (!r) throw nb::value_error(("rows = " + str_of(rows) + ": must be in [0, 2**64)").c_str());
    n_rows = *r;
  }
  const Described* buffers[5] = {&p, &g, &m};
  size_t count = 3;
  const bool has_second = !exp_avg_sq.is_none();
  if (!has_second) {
    if (equals(buffer_mode, 1) || equals(buffer_mode, 2))
      throw nb::value_error(("exp_avg_sq is required (buffer_mode = " + str_of(buffer_mode) + ")").c_str());
  } else {
    describe(exp_avg_sq, "exp_avg_sq", hooks, false, true, v);
    // 0: an unknown mode or rows that do not divide N, which the C library names.
    const size_t expected = luminav_exp_avg_sq_length(p.numel, n_rows, to_int(buffer_mode), td_code);
    if (p.numel && expected && v.numel != expected) {
      const std::string what =
          equals(buffer_mode, 2) ? std::string("CLM") : "TD-CLM with td_factor=" + repr_of(td_factor);
      throw nb::value_error(("exp_avg_sq has " + std::to_string(v.numel) + " elements but " + what + " needs " +
                             std::to_string(expected) + " (N = " + std::to_string(p.numel) +
                             ", rows = " + std::to_string(n_rows) + ")").c_str());
    }
    buffers[count++] = &v;
  }
  const bool has_master = !master.is_none();
  if (has_master) {
    describe(master, "master", hooks, false, true, w);
    if (w.numel != p.numel) {
      throw nb::value_error(("master has " + std::to_string(w.numel) + " elements but param has " +
                             std::to_string(p.numel)).c_str());
    }
    buffers[count++] = &w;
  }
  check_one_device(buffers, count);
  check_no_overlap(buffers, count);
  const std::optional<uint64_t> seed_value = to_uint64(seed);
  if (!seed_value) throw nb::value_error(("seed = " + str_of(seed) + ": must be in [0, 2**64)").c_str());
  const luminav_hyperparams hp =
      hyperparams_from(lr, beta1, beta2, eps, weight_decay, tau, lam, buffer_mode, cautious, bound_mode,
                       bound_ratio, step, check_finite, stochastic_rounding, grad_scale);

  luminav_tensor t{};
  t.param = reinterpret_cast<void*>(p.ptr);
  t.grad = reinterpret_cast<const void*>(g.ptr);
  t.exp_avg = reinterpret_cast<float*>(m.ptr);
  t.exp_avg_sq = has_second ? reinterpret_cast<float*>(v.ptr) : nullptr;
  t.master = has_master ? reinterpret_cast<float*>(w.ptr) : nullptr;
  t.num_elements = p.numel;
  t.index_offset = 0;
  t.seed = *seed_value;
  t.param_dtype = p.dtype;
  t.grad_dtype = g.dtype;
  t.rows = n_rows;
  t.td_factor = td_code;

  uintptr_t stream = 0;
  if (p.device_type == LUMINAV_DEVICE_CUDA) stream = nb::cast<uintptr_t>(hooks.cuda_stream(p.device_index));
  // Where to run: CUDA tensors route to the cuda backend when `backend` is
  // "auto", unless LUMINAV_FORCE_BACKEND names one (the library's dispatcher
  // then applies it, e.g. triton-aot).
  if (!PyUnicode_Check(backend.ptr())) {
    throw nb::type_error(("backend must be a string, got " +
                          nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(backend.ptr())))
                                                    .attr("__name__"))).c_str());
  }
  Py_ssize_t name_size = 0;
  const char* backend_name = PyUnicode_AsUTF8AndSize(backend.ptr(), &name_size);
  if (backend_name == nullptr) throw_current();
  if (p.device_type == LUMINAV_DEVICE_CUDA && std::strcmp(backend_name, "auto") == 0) {
    const char* forced = std::getenv("LUMINAV_FORCE_BACKEND");
    if (forced == nullptr || forced[0] == '\0' || std::strcmp(forced, "auto") == 0) backend_name = "cuda";
  }
  luminav_options o{};
  o.backend = backend_name;
  o.device_type = p.device_type;
  o.device_index = p.device_index;
  o.stream = reinterpret_cast<void*>(stream);

  if (asynchronous) {
    if (p.device_type != LUMINAV_DEVICE_CPU) {
      throw nb::value_error(("asynchronous=True is for host arrays (the vulkan backend); param is on " +
                             p.device_label + ", whose steps the torch optimizer runs asynchronously")
                                .c_str());
    }
    luminav_group group{&hp, &t, 1, nullptr, nullptr, 0};
    // The library writes the status copy when it sees the step complete,
    // after this call returned: a word that outlives it (errors come from a
    // later call; the counts are not read here).
    static luminav_step_status* word = new luminav_step_status{};
    luminav_async a{};
    a.status = word;
    int status;
    {
      nb::gil_scoped_release release;
      status = luminav_step_groups_enqueue(&group, 1, &o, &a);
    }
    if (status != LUMINAV_STATUS_OK) return nb::make_tuple(status, std::string(luminav_last_error_message()));
    // Note [arrays in flight]: the device may still read and write these
    // arrays; holding them keeps their memory alive until synchronize().
    nb::list& held = arrays_in_flight();
    for (nb::handle h : {param, grad, exp_avg, exp_avg_sq, master})
      if (!h.is_none()) held.append(h);
    return nb::none();
  }

  int status;
  {
    // The buffers stay exported (Py_buffer views held) while the engine runs
    // without the interpreter: NumPy cannot resize or free them meanwhile.
    nb::gil_scoped_release release;
    status = luminav_step_multi(&hp, &t, 1, &o);
  }
  if (status == LUMINAV_STATUS_OK) return nb::none();
  return nb::make_tuple(status, std::string(luminav_last_error_message()));
}

}  // namespace

void register_optim_functional(nb::module_& m) {
  // Every argument may be None (nanobind refuses None for an object argument
  // unless told): the checks above say what a None means, as Python did.
  m.def("functional_step", &functional_step,
        nb::arg("param").none(), nb::arg("grad").none(), nb::arg("exp_avg").none(),
        nb::arg("exp_avg_sq").none(), nb::arg("master").none(), nb::arg("lr").none(), nb::arg("beta1").none(),
        nb::arg("beta2").none(), nb::arg("eps").none(), nb::arg("weight_decay").none(), nb::arg("tau").none(),
        nb::arg("lam").none(), nb::arg("buffer_mode").none(), nb::arg("cautious").none(),
        nb::arg("bound_mode").none(), nb::arg("bound_ratio").none(), nb::arg("step").none(),
        nb::arg("seed").none(), nb::arg("check_finite").none(), nb::arg("stochastic_rounding").none(),
        nb::arg("backend").none(), nb::arg("td_factor").none(), nb::arg("rows").none(),
        nb::arg("grad_scale").none(), nb::arg("asynchronous") = false,
        "luminamoon.optim.step in one call (checks, buffers, the step without the interpreter): None, or "
        "(status, message) for raise_for_status. Needs set_functional_hooks first.");
  m.def("set_functional_hooks", &set_functional_hooks, nb::arg("hooks"),
        "Registers functional._NATIVE_HOOKS (ndarray, describe_buffer, float dtypes, float32 only, "
        "cuda_stream_handle) for functional_step, once at import (Note [hooks registered once]).");
  m.def("synchronize", &synchronize_steps, nb::arg("backend"),
        "Waits for the asynchronous steps of `backend` (luminav_synchronize) and releases their arrays: None, "
        "or (status, message) for raise_for_status.");
  m.def("hyperparams", &hyperparams_from,
        nb::arg("lr").none(), nb::arg("beta1").none(), nb::arg("beta2").none(), nb::arg("eps").none(),
        nb::arg("weight_decay").none(), nb::arg("tau").none(), nb::arg("lam").none(),
        nb::arg("buffer_mode").none(), nb::arg("cautious").none(), nb::arg("bound_mode").none(),
        nb::arg("bound_ratio").none(), nb::arg("step").none(), nb::arg("check_finite").none(),
        nb::arg("stochastic_rounding").none(), nb::arg("grad_scale").none(),
        "The Hyperparams struct from Python values (functional.make_hyperparams).");
  m.def("td_factor_code", &td_factor_code, nb::arg("td_factor").none(),
        "The C enum of a td_factor name (\"factored\", \"row\" or \"tensor\"); ValueError otherwise.");
}
