// Bindings of the LuminaV C API (luminav.h): conversion and GIL release only.
//
// These functions only translate plain values and pointers (Python ints)
// into the C structs and call the C API with the GIL released; the Python
// front ends turn status codes into exceptions. luminamoon.optim.step's
// checks and call are native, in optim_functional_step.cc. The `_core_*` functions expose the header-only core
// helpers (hash, f16/bf16 conversions) over NumPy arrays so that the Python
// tests can check them against independent references.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "luminav/luminav.h"
#include "optim/core/half_convert.h"
#include "optim/core/stochastic_hash.h"

namespace nb = nanobind;

namespace {

// (status, message): the message is read on the calling thread right after
// the call, where luminav_last_error_message() keeps it.
using StatusAndMessage = std::tuple<int, std::string>;

StatusAndMessage status_of(int status) {
  return {status, status == LUMINAV_STATUS_OK ? std::string() : std::string(luminav_last_error_message())};
}

// Where to run: keeps the backend name alive for the luminav_options pointer.
struct RunOptions {
  std::string backend = "auto";
  int device_type = LUMINAV_DEVICE_CPU;
  int device_index = 0;
  uintptr_t stream = 0;

  luminav_options to_c() const {
    luminav_options o{};
    o.backend = backend.c_str();
    o.device_type = device_type;
    o.device_index = device_index;
    o.stream = reinterpret_cast<void*>(stream);
    o.scratch = nullptr;
    o.scratch_bytes = 0;
    return o;
  }
};

luminav_tensor make_tensor(uintptr_t param, uintptr_t grad, uintptr_t exp_avg, uintptr_t exp_avg_sq,
                           uintptr_t master, size_t num_elements, uint64_t index_offset,
                           uint64_t seed, int param_dtype, int grad_dtype, uint64_t rows,
                           int td_factor) {
  luminav_tensor t{};
  t.param = reinterpret_cast<void*>(param);
  t.grad = reinterpret_cast<const void*>(grad);
  t.exp_avg = reinterpret_cast<float*>(exp_avg);
  t.exp_avg_sq = reinterpret_cast<float*>(exp_avg_sq);
  t.master = reinterpret_cast<float*>(master);
  t.num_elements = num_elements;
  t.index_offset = index_offset;
  t.seed = seed;
  t.param_dtype = param_dtype;
  t.grad_dtype = grad_dtype;
  t.rows = rows;
  t.td_factor = td_factor;
  return t;
}

template <class T>
using Array1D = nb::ndarray<nb::numpy, T, nb::ndim<1>>;
template <class T>
using Input1D = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A fresh NumPy array owning `n` elements of T.
template <class T>
Array1D<T> new_array(size_t n, T** data) {
  T* p = new T[n > 0 ? n : 1];
  nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<T*>(q); });
  *data = p;
  return Array1D<T>(p, {n}, owner);
}

// out[i] = f(in[i]) over a NumPy array (the conversion test hooks).
template <class In, class Out, class F>
Array1D<Out> map_array(const Input1D<In>& in, F f) {
  Out* out = nullptr;
  auto result = new_array<Out>(in.shape(0), &out);
  const In* src = in.data();
  for (size_t i = 0; i < in.shape(0); ++i) out[i] = f(src[i]);
  return result;
}

template <class A, class B, class Out, class F>
Array1D<Out> map_arrays(const Input1D<A>& a, const Input1D<B>& b, F f) {
  if (a.shape(0) != b.shape(0)) throw nb::value_error("arrays must have the same length");
  Out* out = nullptr;
  auto result = new_array<Out>(a.shape(0), &out);
  for (size_t i = 0; i < a.shape(0); ++i) out[i] = f(a.data()[i], b.data()[i]);
  return result;
}

void register_core_hooks(nb::module_& m) {
  namespace core = luminav::core;
  m.def("_core_rounding_bits",
        [](const Input1D<uint64_t>& seed, const Input1D<uint64_t>& step,
           const Input1D<uint64_t>& index) {
          if (seed.shape(0) != step.shape(0) || seed.shape(0) != index.shape(0))
            throw nb::value_error("arrays must have the same length");
          uint32_t* out = nullptr;
          auto result = new_array<uint32_t>(seed.shape(0), &out);
          for (size_t i = 0; i < seed.shape(0); ++i)
            out[i] = core::rounding_bits(seed.data()[i], step.data()[i], index.data()[i]);
          return result;
        },
        nb::arg("seed"), nb::arg("step"), nb::arg("index"),
        "core::rounding_bits over uint64 arrays (test hook).");
  // Each conversion over NumPy arrays of bit patterns (fp32 as uint32, 16-bit as uint16).
  auto narrow = [&m](const char* name, uint16_t (*convert)(float), const char* doc) {
    m.def(name, [convert](const Input1D<uint32_t>& bits) {
      return map_array<uint32_t, uint16_t>(bits, [convert](uint32_t u) { return convert(core::bits_float(u)); });
    }, doc);
  };
  auto widen = [&m](const char* name, float (*convert)(uint16_t), const char* doc) {
    m.def(name, [convert](const Input1D<uint16_t>& bits) {
      return map_array<uint16_t, uint32_t>(bits, [convert](uint16_t h) { return core::float_bits(convert(h)); });
    }, doc);
  };
  auto stochastic = [&m](const char* name, uint16_t (*convert)(float, uint32_t), const char* doc) {
    m.def(name, [convert](const Input1D<uint32_t>& bits, const Input1D<uint32_t>& r) {
      return map_arrays<uint32_t, uint32_t, uint16_t>(
          bits, r, [convert](uint32_t u, uint32_t rr) { return convert(core::bits_float(u), rr); });
    }, doc);
  };
  narrow("_core_f32_to_bf16_rne", core::f32_to_bf16_rne, "fp32 bits -> bf16 bits, round to nearest even (test hook).");
  narrow("_core_f32_to_f16_rne", core::f32_to_f16_rne, "fp32 bits -> f16 bits, round to nearest even (test hook).");
  widen("_core_bf16_to_f32", core::bf16_to_f32, "bf16 bits -> fp32 bits (test hook).");
  widen("_core_f16_to_f32", core::f16_to_f32, "f16 bits -> fp32 bits (test hook).");
  stochastic("_core_f32_to_bf16_stochastic", core::f32_to_bf16_stochastic,
             "fp32 bits and random bits -> bf16 bits by stochastic rounding (test hook).");
  stochastic("_core_f32_to_f16_stochastic", core::f32_to_f16_stochastic,
             "fp32 bits and random bits -> f16 bits by stochastic rounding (test hook).");
}

}  // namespace

void register_optim_functional(nb::module_& m);  // optim_functional_step.cc

void register_optim(nb::module_& m) {
  m.attr("DTYPE_F32") = static_cast<int>(LUMINAV_DTYPE_F32);
  m.attr("DTYPE_BF16") = static_cast<int>(LUMINAV_DTYPE_BF16);
  m.attr("DTYPE_F16") = static_cast<int>(LUMINAV_DTYPE_F16);
  m.attr("DEVICE_CPU") = static_cast<int>(LUMINAV_DEVICE_CPU);
  m.attr("DEVICE_CUDA") = static_cast<int>(LUMINAV_DEVICE_CUDA);
  m.attr("DEVICE_ROCM") = static_cast<int>(LUMINAV_DEVICE_ROCM);
  m.attr("STATUS_OK") = static_cast<int>(LUMINAV_STATUS_OK);
  m.attr("STATUS_INVALID_ARGUMENT") = static_cast<int>(LUMINAV_STATUS_INVALID_ARGUMENT);
  m.attr("STATUS_NONFINITE_GRAD") = static_cast<int>(LUMINAV_STATUS_NONFINITE_GRAD);
  m.attr("STATUS_BACKEND_UNAVAILABLE") = static_cast<int>(LUMINAV_STATUS_BACKEND_UNAVAILABLE);

  nb::class_<luminav_hyperparams>(m, "Hyperparams", "luminav_hyperparams (AdamW defaults)")
      .def("__init__", [](luminav_hyperparams* hp) {
        new (hp) luminav_hyperparams{};
        luminav_hyperparams_init(hp);
      })
      .def_rw("lr", &luminav_hyperparams::lr)
      .def_rw("beta1", &luminav_hyperparams::beta1)
      .def_rw("beta2", &luminav_hyperparams::beta2)
      .def_rw("eps", &luminav_hyperparams::eps)
      .def_rw("weight_decay", &luminav_hyperparams::weight_decay)
      .def_rw("tau", &luminav_hyperparams::tau)
      .def_rw("lam", &luminav_hyperparams::lam)
      .def_rw("bound_ratio", &luminav_hyperparams::bound_ratio)
      .def_rw("buffer_mode", &luminav_hyperparams::buffer_mode)
      .def_rw("cautious", &luminav_hyperparams::cautious)
      .def_rw("bound_mode", &luminav_hyperparams::bound_mode)
      .def_rw("check_finite", &luminav_hyperparams::check_finite)
      .def_rw("stochastic_rounding", &luminav_hyperparams::stochastic_rounding)
      .def_rw("step", &luminav_hyperparams::step)
      .def_rw("grad_scale", &luminav_hyperparams::grad_scale);

  nb::class_<luminav_tensor>(m, "TensorDesc", "luminav_tensor: pointers as Python ints")
      .def("__init__",
           [](luminav_tensor* t, uintptr_t param, uintptr_t grad, uintptr_t exp_avg,
              uintptr_t exp_avg_sq, uintptr_t master, size_t num_elements, uint64_t index_offset,
              uint64_t seed, int param_dtype, int grad_dtype, uint64_t rows, int td_factor) {
             new (t) luminav_tensor(make_tensor(param, grad, exp_avg, exp_avg_sq, master,
                                                num_elements, index_offset, seed, param_dtype,
                                                grad_dtype, rows, td_factor));
           },
           nb::arg("param"), nb::arg("grad"), nb::arg("exp_avg"), nb::arg("exp_avg_sq"),
           nb::arg("master"), nb::arg("num_elements"), nb::arg("index_offset"), nb::arg("seed"),
           nb::arg("param_dtype"), nb::arg("grad_dtype"), nb::arg("rows") = 0,
           nb::arg("td_factor") = static_cast<int>(LUMINAV_TD_TENSOR))
      .def_ro("num_elements", &luminav_tensor::num_elements)
      .def_ro("index_offset", &luminav_tensor::index_offset)
      .def_ro("seed", &luminav_tensor::seed);

  nb::class_<luminav_partials>(m, "Partials", "luminav_partials: pass-1 partial sums")
      .def(nb::init<>())
      .def_rw("nonfinite_count", &luminav_partials::nonfinite_count)
      .def_rw("agree_count", &luminav_partials::agree_count)
      .def_rw("grad_sq_sum", &luminav_partials::grad_sq_sum)
      .def_rw("update_sq_sum", &luminav_partials::update_sq_sum)
      .def_rw("weight_sq_sum", &luminav_partials::weight_sq_sum)
      .def_rw("row_factor_sum", &luminav_partials::row_factor_sum)
      .def_rw("row_count", &luminav_partials::row_count);

  nb::class_<luminav_globals>(m, "Globals", "luminav_globals: values pass 2 needs")
      .def("__init__", [](luminav_globals* g) {
        new (g) luminav_globals{};
        g->cautious_scale = 1.0f;
        g->bound_scale = 1.0f;
      })
      .def_rw("second_moment", &luminav_globals::second_moment)
      .def_rw("cautious_scale", &luminav_globals::cautious_scale)
      .def_rw("bound_scale", &luminav_globals::bound_scale)
      .def_rw("row_factor_mean", &luminav_globals::row_factor_mean)
      .def_rw("logical_rows", &luminav_globals::logical_rows);

  nb::class_<RunOptions>(m, "RunOptions", "luminav_options without scratch (engine-owned)")
      .def("__init__",
           [](RunOptions* o, std::string backend, int device_type, int device_index, uintptr_t stream) {
             new (o) RunOptions{std::move(backend), device_type, device_index, stream};
           },
           nb::arg("backend") = "auto", nb::arg("device_type") = 0, nb::arg("device_index") = 0,
           nb::arg("stream") = 0)
      .def_ro("backend", &RunOptions::backend);

  // The structs are taken by value: the native call, which runs without the
  // GIL, reads a private snapshot that another thread writing the same
  // Python object cannot change under it (Note [free-threaded bindings]).
  m.def("step_multi",
        [](const luminav_hyperparams hp, const std::vector<luminav_tensor>& tensors,
           const RunOptions& options) {
          const luminav_options o = options.to_c();
          int status;
          {
            nb::gil_scoped_release release;
            status = luminav_step_multi(&hp, tensors.data(), tensors.size(), &o);
          }
          return status_of(status);
        },
        nb::arg("hp"), nb::arg("tensors"), nb::arg("options"),
        "luminav_step_multi; returns (status, message).");

  m.def("reduction_rounds", [](const luminav_hyperparams& hp) { return luminav_reduction_rounds(&hp); });

  m.def("reduce",
        [](const luminav_hyperparams hp, const luminav_tensor shard, int round,
           const luminav_globals globals, const RunOptions& options) {
          const luminav_options o = options.to_c();
          luminav_partials out{};
          int status;
          {
            nb::gil_scoped_release release;
            status = luminav_reduce(&hp, &shard, round, &globals, &out, &o);
          }
          auto [code, message] = status_of(status);
          return std::make_tuple(code, message, out);
        },
        nb::arg("hp"), nb::arg("shard"), nb::arg("round"), nb::arg("globals"), nb::arg("options"),
        "luminav_reduce; returns (status, message, partials).");

  m.def("finalize",
        [](const luminav_hyperparams& hp, const luminav_partials& global_sum,
           uint64_t logical_num_elements, int round, float s_old, const luminav_globals& globals) {
          luminav_globals inout = globals;
          const int status = luminav_finalize(&hp, &global_sum, logical_num_elements, round, s_old, &inout);
          auto [code, message] = status_of(status);
          return std::make_tuple(code, message, inout);
        },
        nb::arg("hp"), nb::arg("global_sum"), nb::arg("logical_num_elements"), nb::arg("round"),
        nb::arg("s_old"), nb::arg("globals"),
        "luminav_finalize; returns (status, message, globals).");

  m.def("apply",
        [](const luminav_hyperparams hp, const luminav_tensor shard, const luminav_globals globals,
           const RunOptions& options) {
          const luminav_options o = options.to_c();
          int status;
          {
            nb::gil_scoped_release release;
            status = luminav_apply(&hp, &shard, &globals, &o);
          }
          return status_of(status);
        },
        nb::arg("hp"), nb::arg("shard"), nb::arg("globals"), nb::arg("options"),
        "luminav_apply; returns (status, message).");

  m.def("version", [] { return std::string(luminav_version()); });
  m.def("status_name", [](int status) { return std::string(luminav_status_name(status)); });
  m.def("scratch_bytes", [](size_t n) { return luminav_scratch_bytes(n); });
  m.def("exp_avg_sq_length", [](uint64_t n, uint64_t rows, int mode, int td_factor) {
    return luminav_exp_avg_sq_length(n, rows, mode, td_factor);
  });
  m.attr("TD_FACTORED") = static_cast<int>(LUMINAV_TD_FACTORED);
  m.attr("TD_ROW") = static_cast<int>(LUMINAV_TD_ROW);
  m.attr("TD_TENSOR") = static_cast<int>(LUMINAV_TD_TENSOR);
  m.def("cpu_features", [] { return std::string(luminav_cpu_features()); });
  m.def("last_backend", [] { return std::string(luminav_last_backend()); });
  m.def("set_num_threads", [](int n) { return luminav_set_num_threads(n); });
  m.def("get_num_threads", [] { return luminav_get_num_threads(); });
  m.def("backends", [] {
    // [(name, available, why_not)] for every backend compiled in.
    std::vector<std::tuple<std::string, bool, std::string>> out;
    const int count = luminav_backend_count();
    for (int i = 0; i < count; ++i) {
      out.emplace_back(luminav_backend_name(i), luminav_backend_available(i) != 0,
                       luminav_backend_unavailable_reason(i));
    }
    return out;
  });
  m.def("backend_devices", [](int index) { return std::string(luminav_backend_devices(index)); });

  register_core_hooks(m);
  register_optim_functional(m);  // after Hyperparams, which it returns
}
