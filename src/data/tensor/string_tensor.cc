// StringTensor: ownership, the lazily built Utf8View slots, comparisons.
#include "luminamoon/string_tensor.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace luminamoon {

struct StringTensor::Views {
  std::once_flag once;
  std::vector<StringViewSlot> slots;
  std::vector<const uint8_t*> buffers;
  std::vector<int64_t> buffer_sizes;
};

namespace {
const int64_t kZeroOffset = 0;
}

StringTensor::StringTensor()
    : data_(nullptr), offsets_(&kZeroOffset), size_(0), views_(std::make_shared<Views>()) {}

StringTensor::StringTensor(TextBatch&& batch) : views_(std::make_shared<Views>()) {
  auto owned = std::make_shared<TextBatch>(std::move(batch));
  data_ = owned->data.data();
  offsets_ = owned->offsets.data();
  size_ = owned->size();
  owner_ = std::move(owned);
}

StringTensor::StringTensor(std::shared_ptr<const void> owner, const uint8_t* data, const int64_t* offsets,
                           size_t size)
    : owner_(std::move(owner)), data_(data), offsets_(offsets), size_(size), views_(std::make_shared<Views>()) {
  if (!offsets_) {
    if (size_) throw std::invalid_argument("StringTensor: offsets are required");
    offsets_ = &kZeroOffset;
  }
}

// Note [view buffers]: a Utf8View slot addresses its bytes with a 32-bit
// buffer offset, so the flat bytes are cut into buffers that each stay below
// 2 GiB; the first starts with the batch, a further one at the first long
// string that would not fit in the previous one. The
// buffers are pointers into the flat bytes, so the views copy no string.
const StringTensor::Views& StringTensor::views_state() const {
  std::call_once(views_->once, [this] {
    Views& v = *views_;
    v.slots.resize(size_);
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    int64_t buffer_start = -1;  // absolute offset of the current buffer in data_
    int64_t buffer_end = 0;
    for (size_t i = 0; i < size_; ++i) {
      const int64_t begin = offsets_[i], len = offsets_[i + 1] - offsets_[i];
      if (len > kMax) throw std::length_error("StringTensor: a string over 2 GiB has no Utf8View form");
      StringViewSlot& s = v.slots[i];
      std::memset(&s, 0, sizeof s);
      s.length = static_cast<int32_t>(len);
      if (len <= kStringViewInlineMax) {
        if (len) std::memcpy(reinterpret_cast<uint8_t*>(&s) + 4, data_ + begin, static_cast<size_t>(len));
        continue;
      }
      std::memcpy(s.prefix, data_ + begin, 4);
      if (buffer_start < 0 || begin + len - buffer_start > kMax) {
        if (buffer_start >= 0) v.buffer_sizes.back() = buffer_end - buffer_start;
        // The first buffer starts with the batch, so that under 2 GiB a slot's
        // offset is the string's flat offset.
        buffer_start = (buffer_start < 0 && begin + len - offsets_[0] <= kMax) ? offsets_[0] : begin;
        v.buffers.push_back(data_ + buffer_start);
        v.buffer_sizes.push_back(0);
      }
      s.ref.buffer_index = static_cast<int32_t>(v.buffers.size() - 1);
      s.ref.offset = static_cast<int32_t>(begin - buffer_start);
      buffer_end = std::max(buffer_end, begin + len);
    }
    if (buffer_start >= 0) v.buffer_sizes.back() = buffer_end - buffer_start;
  });
  return *views_;
}

const std::vector<StringViewSlot>& StringTensor::views() const { return views_state().slots; }
const std::vector<const uint8_t*>& StringTensor::view_buffers() const { return views_state().buffers; }
const std::vector<int64_t>& StringTensor::view_buffer_sizes() const { return views_state().buffer_sizes; }

int compare_string_views(const StringViewSlot& a, const StringViewSlot& b, const uint8_t* const* buffers) {
  const int32_t common_prefix = std::min({a.length, b.length, int32_t{4}});
  if (int c = std::memcmp(a.prefix, b.prefix, static_cast<size_t>(common_prefix))) return c < 0 ? -1 : 1;
  auto bytes = [&](const StringViewSlot& s) -> const uint8_t* {
    return s.length <= kStringViewInlineMax ? reinterpret_cast<const uint8_t*>(&s) + 4
                                             : buffers[s.ref.buffer_index] + s.ref.offset;
  };
  const int32_t n = std::min(a.length, b.length);
  if (n > common_prefix) {
    if (int c = std::memcmp(bytes(a) + common_prefix, bytes(b) + common_prefix, static_cast<size_t>(n - common_prefix)))
      return c < 0 ? -1 : 1;
  }
  return a.length < b.length ? -1 : (a.length > b.length ? 1 : 0);
}

int StringTensor::compare(size_t i, size_t j) const {
  const Views& v = views_state();
  return compare_string_views(v.slots[i], v.slots[j], v.buffers.data());
}

std::vector<uint32_t> StringTensor::offsets_u32() const {
  if (total_bytes() > std::numeric_limits<uint32_t>::max())
    throw std::length_error("StringTensor: uint32 offsets need a batch under 4 GiB; split the batch");
  std::vector<uint32_t> out(size_ + 1);
  for (size_t i = 0; i <= size_; ++i) out[i] = static_cast<uint32_t>(offsets_[i] - offsets_[0]);
  return out;
}

}  // namespace luminamoon
