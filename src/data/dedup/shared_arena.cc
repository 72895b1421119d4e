// shared_arena(): a small process-wide cache of oneTBB arenas by thread count.
#include "data/dedup/shared_arena.h"

#include <map>
#include <memory>
#include <mutex>

#include "luminamoon/data_threads.h"

namespace luminamoon {

tbb::task_arena& shared_arena(int num_threads) {
  if (num_threads <= 0) num_threads = data_num_threads();
  static std::mutex mu;
  static auto* arenas = new std::map<int, std::unique_ptr<tbb::task_arena>>();  // never destroyed:
  // worker threads may outlive static destructors at exit
  std::lock_guard lock(mu);
  auto& slot = (*arenas)[num_threads];
  if (!slot) {
    slot = std::make_unique<tbb::task_arena>(num_threads);
    slot->initialize();
  }
  return *slot;
}

}  // namespace luminamoon
