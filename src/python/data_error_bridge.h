// DataError -> the Python package's DataError(message, exit_code): shared by
// every data-engine binding file.
#pragma once

#include <nanobind/nanobind.h>

#include <string_view>

#include "luminamoon/data_error.h"

namespace luminamoon::bridge {

namespace nb = nanobind;

// The Python class every data-engine error becomes.
inline constexpr const char* kDataErrorModule = "luminamoon.data.pipeline";

[[noreturn]] inline void raise_data_error(const DataError& e) {
  nb::object cls = nb::module_::import_(kDataErrorModule).attr("DataError");
  // Messages name paths, which need not be UTF-8.
  std::string_view what = e.what();
  nb::object message =
      nb::steal(PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "replace"));
  nb::object exc = cls(message, e.exit_code());
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw nb::python_error();
}

// Runs f, turning a DataError into the Python DataError.
template <class F>
auto translating(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const DataError& e) {
    raise_data_error(e);
  }
}

}  // namespace luminamoon::bridge
