// TensorExchange: tensor facts through DLPack's C exchange table (Note [tensor reads through DLPack]).
#include "python/tensor_exchange.h"

#include <cstddef>

#include "luminav/luminav.h"

namespace nb = nanobind;

namespace luminamoon::python {
namespace {

// The head of DLPack's DLPackExchangeAPI (dlpack.h, major version 1): its
// stable header, then five function pointers of which the fourth fills a
// caller's DLTensor. Only the layout is relied on, as DLPack's ABI promises.
struct ExchangeVersion {
  uint32_t major;
  uint32_t minor;
};
struct ExchangeTable {
  ExchangeVersion version;
  void* prev_api;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, void* out_dltensor);
  void* current_work_stream;
};
constexpr uint32_t kExchangeMajor = 1;
constexpr uint16_t kMinMinorWithTable = 2;  // the table appeared in DLPack 1.2

// DLPack's DLTensor, without the default member initializers of nanobind's
// copy of it: the producer fills every field, and zeroing the 48 bytes first
// (a `rep stos` per read, two reads per parameter and step) was 2-3% of the
// F1 step's samples (docs/benchmarks.md, "Issue 13 (session 6, CPU front end)").
struct DLTensorFields {
  void* data;
  struct {
    int32_t device_type, device_id;
  } device;
  int32_t ndim;
  struct {
    uint8_t code, bits;
    uint16_t lanes;
  } dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
// Every field where DLPack (and nanobind's copy) has it: the producer writes by that layout.
static_assert(sizeof(DLTensorFields) == sizeof(nb::dlpack::dltensor) &&
              offsetof(DLTensorFields, data) == offsetof(nb::dlpack::dltensor, data) &&
              offsetof(DLTensorFields, device) == offsetof(nb::dlpack::dltensor, device) &&
              offsetof(DLTensorFields, ndim) == offsetof(nb::dlpack::dltensor, ndim) &&
              offsetof(DLTensorFields, dtype) == offsetof(nb::dlpack::dltensor, dtype) &&
              offsetof(DLTensorFields, shape) == offsetof(nb::dlpack::dltensor, shape) &&
              offsetof(DLTensorFields, strides) == offsetof(nb::dlpack::dltensor, strides) &&
              offsetof(DLTensorFields, byte_offset) == offsetof(nb::dlpack::dltensor, byte_offset));

// DLPack's type and device codes (dlpack.h).
constexpr uint8_t kDLFloat = 2, kDLBfloat = 4;
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLROCM = 10, kDLROCMHost = 11;

template <class DataType>
int dtype_code(const DataType& t) {
  if (t.lanes != 1) return -1;
  if (t.code == kDLFloat && t.bits == 32) return LUMINAV_DTYPE_F32;
  if (t.code == kDLBfloat && t.bits == 16) return LUMINAV_DTYPE_BF16;
  if (t.code == kDLFloat && t.bits == 16) return LUMINAV_DTYPE_F16;
  return -1;
}

int device_code(int32_t dl_device_type) {
  switch (dl_device_type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost: return LUMINAV_DEVICE_CPU;
    case kDLCUDA: return LUMINAV_DEVICE_CUDA;
    case kDLROCM: return LUMINAV_DEVICE_ROCM;
    default: return -1;
  }
}

}  // namespace

TensorExchange::TensorExchange(nb::handle tensor_type, nb::handle parameter_type) {
  if (!tensor_type.is_valid() || tensor_type.is_none()) return;
  PyObject* capsule = PyObject_GetAttrString(tensor_type.ptr(), "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return;
  }
  auto* table = static_cast<const ExchangeTable*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  Py_DECREF(capsule);  // the table itself lives as long as the process (DLPack's contract)
  if (table == nullptr) {
    PyErr_Clear();
    return;
  }
  if (table->version.major != kExchangeMajor || table->version.minor < kMinMinorWithTable) return;
  read_ = table->dltensor_from_py_object_no_sync;  // may be NULL: the producer does not offer it
  tensor_type_ = nb::borrow(tensor_type);
  parameter_type_ = nb::borrow(parameter_type);
}

bool TensorExchange::read(nb::handle tensor, TensorFacts* out) const {
  if (read_ == nullptr) return false;
  const PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(tensor.ptr()));
  if (type != tensor_type_.ptr() && type != parameter_type_.ptr()) return false;
  DLTensorFields t;  // left uninitialized: filled by the producer (see DLTensorFields)
  if (read_(tensor.ptr(), &t) != 0) {
    PyErr_Clear();  // refused (a sparse tensor, an unknown dtype): the caller asks through Python
    return false;
  }
  uint64_t n = 1;
  bool contiguous = true;
  int64_t expected = 1;  // torch's rule: dimensions of size 1 may have any stride
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    const int64_t size = t.shape[d];
    n *= static_cast<uint64_t>(size);
    if (size != 1) {
      if (t.strides != nullptr && t.strides[d] != expected) contiguous = false;
      expected *= size;
    }
  }
  out->data = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  out->dtype = dtype_code(t.dtype);
  out->num_elements = n;
  out->contiguous = contiguous || n == 0;
  out->device_type = device_code(t.device.device_type);
  out->device_id = t.device.device_id;
  return true;
}

}  // namespace luminamoon::python
