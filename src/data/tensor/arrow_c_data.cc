// StringTensor through the Arrow C data interface: zero-copy export of both
// layouts, import of Arrow string arrays (zero-copy for large_string).
#include "luminamoon/arrow_c_data.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace luminamoon {
namespace {

const char* layout_format(ArrowStringLayout layout) {
  switch (layout) {
    case ArrowStringLayout::kLargeString: return "U";
    case ArrowStringLayout::kString: return "u";
    case ArrowStringLayout::kStringView: return "vu";
  }
  return "U";
}

void release_schema(ArrowSchema* schema) {
  schema->release = nullptr;
}

// What an exported array keeps alive: the tensor (its memory) and the
// buffer pointer table, plus converted offsets or view sizes where needed.
struct ExportedArray {
  StringTensor tensor;
  std::vector<const void*> buffers;
  std::vector<int32_t> offsets32;
  std::vector<int64_t> variadic_sizes;
};

void release_array(ArrowArray* array) {
  delete static_cast<ExportedArray*>(array->private_data);
  array->release = nullptr;
}

}  // namespace

void export_arrow_schema(ArrowStringLayout layout, ArrowSchema* schema) {
  *schema = ArrowSchema{};
  schema->format = layout_format(layout);
  schema->name = "";
  schema->metadata = nullptr;
  schema->flags = ARROW_FLAG_NULLABLE;
  schema->release = release_schema;
}

void export_arrow_array(const StringTensor& tensor, ArrowStringLayout layout, ArrowArray* array) {
  auto priv = std::make_unique<ExportedArray>();
  priv->tensor = tensor;
  const size_t n = tensor.size();
  priv->buffers.push_back(nullptr);  // no validity bitmap: no nulls
  if (layout == ArrowStringLayout::kStringView) {
    const auto& views = tensor.views();
    priv->buffers.push_back(views.data());
    for (const uint8_t* b : tensor.view_buffers()) priv->buffers.push_back(b);
    priv->variadic_sizes = tensor.view_buffer_sizes();
    priv->buffers.push_back(priv->variadic_sizes.data());
  } else if (layout == ArrowStringLayout::kString) {
    const int64_t* off = tensor.offsets();
    if (off[n] > std::numeric_limits<int32_t>::max())
      throw std::length_error("StringTensor: Arrow 'string' needs offsets under 2 GiB; use large_string");
    priv->offsets32.resize(n + 1);
    for (size_t i = 0; i <= n; ++i) priv->offsets32[i] = static_cast<int32_t>(off[i]);
    priv->buffers.push_back(priv->offsets32.data());
    priv->buffers.push_back(tensor.data());
  } else {
    priv->buffers.push_back(tensor.offsets());
    priv->buffers.push_back(tensor.data());
  }
  *array = ArrowArray{};
  array->length = static_cast<int64_t>(n);
  array->null_count = 0;
  array->offset = 0;
  array->n_buffers = static_cast<int64_t>(priv->buffers.size());
  array->n_children = 0;
  array->buffers = priv->buffers.data();
  array->release = release_array;
  array->private_data = priv.release();
}

namespace {

struct ExportedStream {
  StringTensor tensor;
  ArrowStringLayout layout;
  bool done = false;
  std::string error;
};

int stream_get_schema(ArrowArrayStream* stream, ArrowSchema* out) {
  export_arrow_schema(static_cast<ExportedStream*>(stream->private_data)->layout, out);
  return 0;
}

int stream_get_next(ArrowArrayStream* stream, ArrowArray* out) {
  auto* s = static_cast<ExportedStream*>(stream->private_data);
  if (s->done) {
    *out = ArrowArray{};  // release == nullptr marks the end
    return 0;
  }
  try {
    export_arrow_array(s->tensor, s->layout, out);
  } catch (const std::exception& e) {
    s->error = e.what();
    return EINVAL;
  }
  s->done = true;
  return 0;
}

const char* stream_get_last_error(ArrowArrayStream* stream) {
  auto* s = static_cast<ExportedStream*>(stream->private_data);
  return s->error.empty() ? nullptr : s->error.c_str();
}

void stream_release(ArrowArrayStream* stream) {
  delete static_cast<ExportedStream*>(stream->private_data);
  stream->release = nullptr;
}

// Owns an imported ArrowArray and releases it with the last StringTensor.
struct ImportedArray {
  ArrowArray array{};
  std::vector<int64_t> offsets;  // converted offsets, when the source had int32 ones
  ~ImportedArray() {
    if (array.release) array.release(&array);
  }
};

bool valid_at(const uint8_t* validity, int64_t i) {
  return !validity || (validity[i >> 3] >> (i & 7)) & 1;
}

}  // namespace

void export_arrow_stream(const StringTensor& tensor, ArrowStringLayout layout, ArrowArrayStream* stream) {
  auto priv = std::make_unique<ExportedStream>();
  priv->tensor = tensor;
  priv->layout = layout;
  *stream = ArrowArrayStream{};
  stream->get_schema = stream_get_schema;
  stream->get_next = stream_get_next;
  stream->get_last_error = stream_get_last_error;
  stream->release = stream_release;
  stream->private_data = priv.release();
}

StringTensor import_arrow_array(const ArrowSchema* schema, ArrowArray* source) {
  if (!schema || !schema->format || !source || !source->release)
    throw std::invalid_argument("Arrow import: a released or missing array");
  const std::string format = schema->format;
  enum { kOff32, kOff64, kView } kind;
  if (format == "u" || format == "z") kind = kOff32;
  else if (format == "U" || format == "Z") kind = kOff64;
  else if (format == "vu" || format == "vz") kind = kView;
  else
    throw std::invalid_argument("Arrow import: expected a string, large_string or string_view array, got format '" +
                                format + "'");
  auto owner = std::make_shared<ImportedArray>();
  owner->array = *source;
  source->release = nullptr;  // moved
  const ArrowArray& a = owner->array;
  const size_t n = static_cast<size_t>(a.length);
  const auto* validity = static_cast<const uint8_t*>(a.n_buffers > 0 ? a.buffers[0] : nullptr);
  const bool has_nulls = a.null_count != 0 && validity != nullptr;
  if (n == 0) return StringTensor();
  auto is_valid = [&](size_t i) { return !has_nulls || valid_at(validity, a.offset + static_cast<int64_t>(i)); };

  if (kind == kOff64 && !has_nulls) {
    const auto* off = static_cast<const int64_t*>(a.buffers[1]) + a.offset;
    const auto* data = static_cast<const uint8_t*>(a.buffers[2]);
    return StringTensor(owner, data, n ? off : nullptr, n);
  }
  if (kind == kOff32 && !has_nulls) {
    const auto* off = static_cast<const int32_t*>(a.buffers[1]) + a.offset;
    owner->offsets.assign(off, off + (n ? n + 1 : 0));
    const auto* data = static_cast<const uint8_t*>(a.buffers[2]);
    return StringTensor(owner, data, n ? owner->offsets.data() : nullptr, n);
  }
  // Copy into a fresh flat batch: views, or nulls (read as empty strings).
  TextBatch batch;
  batch.offsets.reserve(n + 1);
  for (size_t i = 0; i < n; ++i) {
    std::string_view s;
    if (is_valid(i)) {
      const size_t j = static_cast<size_t>(a.offset) + i;
      if (kind == kView) {
        const auto& slot = static_cast<const StringViewSlot*>(a.buffers[1])[j];
        const uint8_t* bytes = slot.length <= kStringViewInlineMax
                                   ? reinterpret_cast<const uint8_t*>(&slot) + 4
                                   : static_cast<const uint8_t*>(a.buffers[2 + slot.ref.buffer_index]) + slot.ref.offset;
        s = {reinterpret_cast<const char*>(bytes), static_cast<size_t>(slot.length)};
      } else if (kind == kOff32) {
        const auto* off = static_cast<const int32_t*>(a.buffers[1]);
        s = {static_cast<const char*>(a.buffers[2]) + off[j], static_cast<size_t>(off[j + 1] - off[j])};
      } else {
        const auto* off = static_cast<const int64_t*>(a.buffers[1]);
        s = {static_cast<const char*>(a.buffers[2]) + off[j], static_cast<size_t>(off[j + 1] - off[j])};
      }
    }
    batch.push_back(s);
  }
  return StringTensor(std::move(batch));
}

}  // namespace luminamoon
