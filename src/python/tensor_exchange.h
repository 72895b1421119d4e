// A tensor's pointer, dtype, size and layout read through the producer's
// DLPack C exchange table (`__dlpack_c_exchange_api__`), without a Python call.
//
// Note [tensor reads through DLPack]: each torch method the step plan calls
// per gradient (data_ptr(), is_contiguous(), .dtype) costs 0.3-0.6 us on the
// 2-core VM (docs/benchmarks.md, "Issue 13 (session 5, CPU front end)"): its
// argument parser, its torch-function checks, a Python int made and parsed.
// DLPack 1.2 added a table of C functions that a tensor type publishes as a
// capsule on the type; its `dltensor_from_py_object_no_sync` fills a
// caller's DLTensor (data, device, dtype, shape and strides borrowed from the
// tensor) with no Python object made and no reference taken. torch publishes
// it on torch.Tensor (2.11 and later). The reader uses it only for objects of
// the exact types it was given (torch.Tensor, torch.nn.Parameter): a
// subclass may override data_ptr or hold no storage of its own (DTensor), and
// keeps the Python calls. Without the table (an older torch) every read
// reports "not read" and the caller keeps the Python calls too.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>

namespace luminamoon::python {

// What the step needs to know of one tensor.
struct TensorFacts {
  uintptr_t data = 0;         // address of its first element
  int dtype = -1;             // LUMINAV_DTYPE_* code, -1 for any other dtype
  uint64_t num_elements = 0;
  bool contiguous = false;    // row-major dense, as torch's is_contiguous()
  int device_type = -1;       // LUMINAV_DEVICE_*, -1 for any other device
  int32_t device_id = 0;
};

class TensorExchange {
 public:
  TensorExchange() = default;
  // Reads the table from `tensor_type` (torch.Tensor) and accepts objects of
  // exactly `tensor_type` or `parameter_type`. Never throws: a type without a
  // usable table gives a reader that reads nothing.
  TensorExchange(nanobind::handle tensor_type, nanobind::handle parameter_type);

  bool usable() const { return read_ != nullptr; }

  // True with `out` filled; false (no Python error left set) when `tensor`
  // is of another type or the producer refuses it (a sparse tensor, a dtype
  // DLPack has no code for): the caller then asks through Python.
  bool read(nanobind::handle tensor, TensorFacts* out) const;

 private:
  using ReadFn = int (*)(void* py_object, void* out_dltensor);
  ReadFn read_ = nullptr;
  nanobind::object tensor_type_, parameter_type_;  // compared by identity
};

}  // namespace luminamoon::python
