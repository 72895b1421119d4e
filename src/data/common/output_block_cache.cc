// The process-wide cache of large output blocks (Note [output block cache]
// in include/luminamoon/text_batch.h).
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "luminamoon/text_batch.h"

namespace luminamoon::detail {
namespace {

struct Block {
  void* data;
  size_t bytes;
};

class OutputBlockCache {
 public:
  OutputBlockCache() { idle_.reserve(kMaxIdleBlocks); }

  void* acquire(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest idle block that fits, if it is not more than twice the
      // request (a huge block is not spent on a small batch).
      size_t best = idle_.size();
      for (size_t i = 0; i < idle_.size(); ++i) {
        if (idle_[i].bytes >= bytes && idle_[i].bytes <= 2 * bytes &&
            (best == idle_.size() || idle_[i].bytes < idle_[best].bytes))
          best = i;
      }
      if (best != idle_.size()) {
        const Block b = idle_[best];
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(best));
        idle_bytes_ -= b.bytes;
        in_use_[b.data] = b.bytes;
        return b.data;
      }
    }
    void* data = ::operator new(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_[data] = bytes;
    return data;
  }

  // Never throws (the allocator's deallocate is noexcept): idle_ has room for
  // kMaxIdleBlocks from the start, and freeing allocates nothing.
  void release(void* data) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = in_use_.find(data);
    if (it == in_use_.end()) {
      // Not from this cache (another extension module's copy of the static
      // library allocated it): plain memory from ::operator new all the same.
      ::operator delete(data);
      return;
    }
    const size_t bytes = it->second;
    in_use_.erase(it);
    const size_t cap = capacity();
    if (bytes > cap) {
      ::operator delete(data);
      return;
    }
    // The oldest idle blocks go first until the new one fits.
    while (!idle_.empty() && (idle_bytes_ + bytes > cap || idle_.size() >= kMaxIdleBlocks)) {
      ::operator delete(idle_.front().data);
      idle_bytes_ -= idle_.front().bytes;
      idle_.erase(idle_.begin());
    }
    idle_.push_back({data, bytes});
    idle_bytes_ += bytes;
  }

 private:
  static constexpr size_t kMaxIdleBlocks = 64;

  // LUMINAMOON_OUTPUT_CACHE_MB (default 512; 0 turns the cache off).
  static size_t capacity() {
    static const size_t bytes = [] {
      const char* env = std::getenv("LUMINAMOON_OUTPUT_CACHE_MB");
      const size_t mb = env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : 512;
      return mb << 20;
    }();
    return bytes;
  }

  std::mutex mutex_;
  std::vector<Block> idle_;  // oldest first
  size_t idle_bytes_ = 0;
  std::unordered_map<void*, size_t> in_use_;
};

OutputBlockCache& cache() {
  static OutputBlockCache* instance = new OutputBlockCache;  // never destroyed: blocks may outlive statics
  return *instance;
}

}  // namespace

void* acquire_output_block(size_t bytes) { return cache().acquire(bytes); }
void release_output_block(void* data) { cache().release(data); }

}  // namespace luminamoon::detail
