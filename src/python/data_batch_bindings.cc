// Bindings of the data batch stages (TextCleaner, QualityFilter, PIIMasker,
// StringTensor): conversion to/from Python and GIL release only.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

#if defined(LUMINA_DATA_BATCH)

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "luminamoon/arrow_c_data.h"
#include "luminamoon/data_threads.h"
#include "luminamoon/string_tensor.h"
#include "luminamoon/text_cleaner.h"
#if defined(LUMINA_HAVE_QUALITY_FILTER)
#include "luminamoon/quality_filter.h"
#endif
#if defined(LUMINA_HAVE_PII_MASKER)
#include "luminamoon/pii_masker.h"
#endif

using namespace luminamoon;

namespace {

uint8_t g_empty_byte = 0;

// A NumPy array over memory owned by a heap object deleted with the array.
template <class T, class Owner>
nb::ndarray<nb::numpy, T> numpy_over(T* data, std::initializer_list<size_t> shape, Owner* owner) {
  nb::capsule cap(owner, [](void* p) noexcept { delete static_cast<Owner*>(p); });
  return nb::ndarray<nb::numpy, T>(data, shape, cap);
}

template <class T>
nb::ndarray<nb::numpy, T> numpy_from_vector(std::vector<T>&& v, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  return numpy_over<T>(owned->empty() ? nullptr : owned->data(), shape, owned);
}

// list/tuple of str or bytes -> one flat batch (one memcpy per string, no
// per-string allocation).
StringTensor tensor_from_sequence(nb::handle seq) {
  const bool is_list = PyList_Check(seq.ptr());
  if (!is_list && !PyTuple_Check(seq.ptr())) throw nb::type_error("expected a list or tuple of str or bytes");
  const Py_ssize_t n = is_list ? PyList_Size(seq.ptr()) : PyTuple_Size(seq.ptr());
  std::vector<std::string_view> parts(static_cast<size_t>(n));
  size_t total = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = is_list ? PyList_GetItem(seq.ptr(), i) : PyTuple_GetItem(seq.ptr(), i);
    const char* p = nullptr;
    Py_ssize_t len = 0;
    if (PyUnicode_Check(item)) {
      p = PyUnicode_AsUTF8AndSize(item, &len);
      if (!p) throw nb::python_error();
    } else if (PyBytes_Check(item)) {
      char* b = nullptr;
      if (PyBytes_AsStringAndSize(item, &b, &len) != 0) throw nb::python_error();
      p = b;
    } else {
      throw nb::type_error(("texts[" + std::to_string(i) + "] is " + std::string(nb::inst_name(item).c_str()) +
                            ", expected str or bytes").c_str());
    }
    parts[static_cast<size_t>(i)] = {p, static_cast<size_t>(len)};
    total += static_cast<size_t>(len);
  }
  TextBatch batch;
  batch.data.resize(total);
  batch.offsets.resize(static_cast<size_t>(n) + 1);
  size_t pos = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].empty()) std::memcpy(batch.data.data() + pos, parts[i].data(), parts[i].size());
    pos += parts[i].size();
    batch.offsets[i + 1] = static_cast<int64_t>(pos);
  }
  return StringTensor(std::move(batch));
}

StringTensor tensor_from_arrow(nb::capsule schema_cap, nb::capsule array_cap) {
  auto* schema = static_cast<ArrowSchema*>(PyCapsule_GetPointer(schema_cap.ptr(), "arrow_schema"));
  if (!schema) throw nb::python_error();
  auto* array = static_cast<ArrowArray*>(PyCapsule_GetPointer(array_cap.ptr(), "arrow_array"));
  if (!array) throw nb::python_error();
  return import_arrow_array(schema, array);
}

ArrowStringLayout parse_layout(std::string_view format) {
  if (format == "U") return ArrowStringLayout::kLargeString;
  if (format == "u") return ArrowStringLayout::kString;
  if (format == "vu") return ArrowStringLayout::kStringView;
  throw nb::value_error(("StringTensor exports Arrow formats 'U', 'u' or 'vu', not '" + std::string(format) + "'").c_str());
}

nb::tuple export_array_capsules(const StringTensor& t, std::string_view format) {
  const ArrowStringLayout layout = parse_layout(format);
  auto* schema = new ArrowSchema{};
  nb::capsule schema_cap(schema, "arrow_schema", [](void* p) noexcept {
    auto* s = static_cast<ArrowSchema*>(p);
    if (s->release) s->release(s);
    delete s;
  });
  export_arrow_schema(layout, schema);
  auto* array = new ArrowArray{};
  nb::capsule array_cap(array, "arrow_array", [](void* p) noexcept {
    auto* a = static_cast<ArrowArray*>(p);
    if (a->release) a->release(a);
    delete a;
  });
  export_arrow_array(t, layout, array);
  return nb::make_tuple(schema_cap, array_cap);
}

nb::capsule export_stream_capsule(const StringTensor& t, std::string_view format) {
  const ArrowStringLayout layout = parse_layout(format);
  auto* stream = new ArrowArrayStream{};
  nb::capsule cap(stream, "arrow_array_stream", [](void* p) noexcept {
    auto* s = static_cast<ArrowArrayStream*>(p);
    if (s->release) s->release(s);
    delete s;
  });
  export_arrow_stream(t, layout, stream);
  return cap;
}

std::string schema_format(nb::capsule schema_cap) {
  auto* schema = static_cast<ArrowSchema*>(PyCapsule_GetPointer(schema_cap.ptr(), "arrow_schema"));
  if (!schema) throw nb::python_error();
  return schema->format ? schema->format : "";
}

// (bytes uint8, offsets int64) sharing the tensor's memory; offsets rebased
// to 0 (a copy of the offsets only) when the tensor is a slice.
template <class Framework>
nb::tuple flat_arrays(const StringTensor& t) {
  const size_t n = t.size();
  const int64_t base = t.offsets()[0];
  uint8_t* bytes = const_cast<uint8_t*>(t.data() ? t.data() + base : &g_empty_byte);
  auto* keep_bytes = new StringTensor(t);
  nb::capsule bytes_owner(keep_bytes, [](void* p) noexcept { delete static_cast<StringTensor*>(p); });
  nb::ndarray<Framework, uint8_t, nb::ndim<1>> b(bytes, {t.total_bytes()}, bytes_owner);
  if (base == 0) {
    auto* keep_off = new StringTensor(t);
    nb::capsule off_owner(keep_off, [](void* p) noexcept { delete static_cast<StringTensor*>(p); });
    nb::ndarray<Framework, int64_t, nb::ndim<1>> o(const_cast<int64_t*>(t.offsets()), {n + 1}, off_owner);
    return nb::make_tuple(b, o);
  }
  auto* off = new std::vector<int64_t>(t.offsets(), t.offsets() + n + 1);
  for (auto& x : *off) x -= base;
  nb::capsule off_owner(off, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  nb::ndarray<Framework, int64_t, nb::ndim<1>> o(off->data(), {n + 1}, off_owner);
  return nb::make_tuple(b, o);
}

}  // namespace

void register_data_batch(nb::module_& m) {
  m.attr("HAVE_DATA_BATCH") = true;
  m.def("data_set_num_threads", &set_data_num_threads, nb::arg("num_threads"));
  m.def("data_get_num_threads", &data_num_threads);

  nb::class_<StringTensor>(m, "_StringTensor")
      .def(nb::init<>())
      .def_static("from_sequence", &tensor_from_sequence, nb::arg("items"))
      .def_static("from_arrow", &tensor_from_arrow, nb::arg("schema"), nb::arg("array"))
      .def("__len__", &StringTensor::size)
      .def("get_bytes",
           [](const StringTensor& t, size_t i) {
             if (i >= t.size()) throw nb::index_error();
             std::string_view s = t[i];
             return nb::bytes(s.data(), s.size());
           })
      .def("get_str",
           [](const StringTensor& t, size_t i) {
             if (i >= t.size()) throw nb::index_error();
             std::string_view s = t[i];
             return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
           })
      .def("to_pylist",
           [](const StringTensor& t) {
             nb::list out;
             for (size_t i = 0; i < t.size(); ++i) {
               std::string_view s = t[i];
               out.append(nb::steal(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace")));
             }
             return out;
           })
      .def_prop_ro("nbytes", &StringTensor::total_bytes)
      .def("compare", [](const StringTensor& t, size_t i, size_t j) {
             if (i >= t.size() || j >= t.size()) throw nb::index_error();
             return t.compare(i, j);
           })
      .def("argsort",
           [](const StringTensor& t) {
             std::vector<int64_t> idx(t.size());
             {
               nb::gil_scoped_release release;
               for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
               const auto& v = t.views();
               const uint8_t* const* bufs = t.view_buffers().data();
               std::stable_sort(idx.begin(), idx.end(),
                                [&](int64_t a, int64_t b) { return compare_string_views(v[a], v[b], bufs) < 0; });
             }
             const size_t n = idx.size();
             return numpy_from_vector(std::move(idx), {n});
           })
      .def("views",
           [](const StringTensor& t) {
             {
               nb::gil_scoped_release release;
               t.views();
             }
             auto* keep = new StringTensor(t);
             auto* p = reinterpret_cast<uint8_t*>(const_cast<StringViewSlot*>(keep->views().data()));
             return numpy_over<uint8_t>(p ? p : &g_empty_byte, {t.size(), 16}, keep);
           })
      .def("offsets_u32",
           [](const StringTensor& t) {
             std::vector<uint32_t> o = t.offsets_u32();
             const size_t n = o.size();
             return numpy_from_vector(std::move(o), {n});
           })
      .def("flat_numpy", &flat_arrays<nb::numpy>)
      .def("flat_torch", &flat_arrays<nb::pytorch>)
      .def("arrow_array_capsules", &export_array_capsules, nb::arg("format") = "U")
      .def("arrow_stream_capsule", &export_stream_capsule, nb::arg("format") = "U");

  m.def("_arrow_schema_format", &schema_format, nb::arg("schema"));

  m.def(
      "clean_batch",
      [](const StringTensor& t, std::string_view policy) {
        const TextCleaner cleaner(parse_invalid_utf8_policy(policy));
        CleanResult r;
        {
          nb::gil_scoped_release release;
          r = cleaner.clean(t.view());
        }
        std::vector<uint8_t> status(r.status.size());
        std::memcpy(status.data(), r.status.data(), status.size());
        const size_t n = status.size();
        return nb::make_tuple(StringTensor(std::move(r.texts)), numpy_from_vector(std::move(status), {n}));
      },
      nb::arg("texts"), nb::arg("invalid_utf8") = "replace");
  m.def("is_valid_utf8", [](nb::bytes b) { return is_valid_utf8({b.c_str(), b.size()}); });

#if defined(LUMINA_HAVE_QUALITY_FILTER)
  m.def("quality_checks", [] {
    nb::list out;
    for (const QualityCheck& c : quality_checks())
      out.append(nb::make_tuple(c.name, quality_metric_name(c.metric), c.is_minimum, c.default_bound));
    return out;
  });
  m.def("quality_metric_names", [] {
    nb::list out;
    for (size_t i = 0; i < kQualityMetricCount; ++i) out.append(quality_metric_name(static_cast<QualityMetric>(i)));
    return out;
  });
  m.def(
      "filter_quality",
      [](const StringTensor& t, const std::vector<std::pair<std::string, std::optional<double>>>& bounds,
         bool with_metrics) {
        QualityThresholds th;
        for (const auto& [name, bound] : bounds) th.set(name, bound);
        th.validate();
        const QualityFilter filter(th);
        QualityResult r;
        {
          nb::gil_scoped_release release;
          r = filter.evaluate(t.view(), with_metrics);
        }
        const size_t n = r.size;
        nb::object metrics = nb::none();
        if (with_metrics) metrics = nb::cast(numpy_from_vector(std::move(r.metrics), {kQualityMetricCount, n}));
        return nb::make_tuple(numpy_from_vector(std::move(r.keep), {n}),
                              numpy_from_vector(std::move(r.failed_check), {n}), metrics);
      },
      nb::arg("texts"), nb::arg("bounds"), nb::arg("with_metrics") = true);
#endif

#if defined(LUMINA_HAVE_PII_MASKER)
  m.def("pii_type_names", [] {
    nb::list out;
    for (size_t i = 0; i < kPiiTypeCount; ++i) out.append(pii_type_name(static_cast<PiiType>(i)));
    return out;
  });
  nb::class_<PiiMasker>(m, "_PiiMasker")
      .def("__init__",
           [](PiiMasker* self, std::optional<std::vector<std::string>> types, bool keep_private_ip) {
             PiiOptions opt;
             if (types) {
               opt.enabled.fill(false);
               for (const auto& name : *types) opt.enabled[static_cast<size_t>(parse_pii_type(name))] = true;
             }
             opt.keep_private_ip = keep_private_ip;
             new (self) PiiMasker(opt);
           },
           nb::arg("types").none() = nb::none(), nb::arg("keep_private_ip") = false)
      .def("mask",
           [](const PiiMasker& masker, const StringTensor& t) {
             PiiResult r;
             {
               nb::gil_scoped_release release;
               r = masker.mask(t.view());
             }
             nb::dict counts;
             for (size_t i = 0; i < kPiiTypeCount; ++i)
               if (masker.options().enabled[i]) counts[pii_type_name(static_cast<PiiType>(i))] = r.counts[i];
             return nb::make_tuple(StringTensor(std::move(r.texts)), counts);
           })
      .def_prop_ro("engine", [](const PiiMasker& masker) { return std::string(masker.engine()); })
      .def("find", [](const PiiMasker& masker, nb::bytes text) {
        nb::list out;
        for (const PiiMatch& mt : masker.find({text.c_str(), text.size()}))
          out.append(nb::make_tuple(mt.begin, mt.end, pii_type_name(mt.type)));
        return out;
      });
#endif
}

#else
void register_data_batch(nb::module_& m) { m.attr("HAVE_DATA_BATCH") = false; }
#endif
