// KeptSignatures (Note [signatures on disk] in kept_signatures.h).
#include "data/minhash/kept_signatures.h"

#include <unistd.h>

#include <cstring>
#include <string_view>

#include "data/state/durable_io.h"

namespace luminamoon {

KeptSignatures::KeptSignatures(size_t width, const std::string& dir)
    : width_(width), stride_(width + 2), record_(stride_) {
  fd_ = durable::open_scratch_file(dir, &what_);
  if (fd_ >= 0) tail_.reserve(kBlockDocs * stride_);
}

KeptSignatures::~KeptSignatures() {
  if (fd_ >= 0) ::close(fd_);
}

void KeptSignatures::append(const uint64_t* sig, int64_t ref) {
  for (size_t k = 0; k < width_; ++k) tail_.push_back(static_cast<uint32_t>(sig[k]));
  const auto bits = static_cast<uint64_t>(ref);
  tail_.push_back(static_cast<uint32_t>(bits));
  tail_.push_back(static_cast<uint32_t>(bits >> 32));
  if (fd_ >= 0 && tail_.size() >= kBlockDocs * stride_) flush_tail();
}

void KeptSignatures::flush_tail() {
  const std::string_view bytes(reinterpret_cast<const char*>(tail_.data()), tail_.size() * sizeof(uint32_t));
  durable::pwrite_all(fd_, bytes, static_cast<uint64_t>(in_file_) * stride_ * sizeof(uint32_t), what_ + "/(LSH signatures)");
  in_file_ += tail_.size() / stride_;
  tail_.clear();
}

int64_t KeptSignatures::read(size_t id, uint32_t* out) const {
  const uint32_t* r = record_.data();
  if (id >= in_file_) {
    r = tail_.data() + (id - in_file_) * stride_;
  } else {
    const size_t bytes = stride_ * sizeof(uint32_t);
    durable::pread_exact(fd_, record_.data(), bytes, static_cast<uint64_t>(id) * bytes, what_ + "/(LSH signatures)",
                         "read LSH signatures", DataErrorKind::kOutput);
  }
  std::memcpy(out, r, width_ * sizeof(uint32_t));
  return static_cast<int64_t>(uint64_t{r[width_]} | uint64_t{r[width_ + 1]} << 32);
}

}  // namespace luminamoon
