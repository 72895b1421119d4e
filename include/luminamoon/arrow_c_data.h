// The Arrow C data interface structs (ABI-stable, from the Arrow
// specification) and StringTensor's export/import through them.
#pragma once

#include <cstdint>

#include "luminamoon/string_tensor.h"

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4
extern "C" {
struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};
struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};
}
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
extern "C" {
struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};
}
#endif

namespace luminamoon {

// Which Arrow type an export produces.
enum class ArrowStringLayout : uint8_t {
  kLargeString,  // "U": the flat layout as is (zero-copy)
  kString,       // "u": int32 offsets (the offsets are converted; bytes shared); < 2 GiB
  kStringView,   // "vu": the views layout (zero-copy over the flat bytes)
};

// Fills schema and array (both owned by the caller afterwards, released
// through their release callbacks); the tensor's memory stays alive until
// the array is released. Throws std::length_error for kString over 2 GiB.
void export_arrow_schema(ArrowStringLayout layout, ArrowSchema* schema);
void export_arrow_array(const StringTensor& tensor, ArrowStringLayout layout, ArrowArray* array);
// A stream holding one array (the whole tensor).
void export_arrow_stream(const StringTensor& tensor, ArrowStringLayout layout, ArrowArrayStream* stream);

// Takes ownership of an Arrow string/large_string/string_view (or binary
// kinds) array: it is moved out of `array` (array->release becomes null).
// large_string without nulls is zero-copy; string converts its offsets only;
// views and arrays with nulls (read as "") are copied into the flat layout.
// Throws std::invalid_argument for any other type.
StringTensor import_arrow_array(const ArrowSchema* schema, ArrowArray* array);

}  // namespace luminamoon
