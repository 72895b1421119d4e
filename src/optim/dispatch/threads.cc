// Thread count of the CPU backends: explicit setting, env, or core count.
#include "optim/dispatch/threads.h"

#include <atomic>
#include <cstdlib>
#include <thread>

namespace luminav::dispatch {
namespace {

std::atomic<int> explicit_threads{0};

int default_threads() {
  static const int value = [] {
    if (const char* env = std::getenv("LUMINAV_NUM_THREADS")) {
      char* end = nullptr;
      const long parsed = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && parsed > 0 && parsed <= 4096) return static_cast<int>(parsed);
    }
    const unsigned cores = std::thread::hardware_concurrency();
    return cores == 0 ? 1 : static_cast<int>(cores);
  }();
  return value;
}

}  // namespace

int num_threads() {
  const int chosen = explicit_threads.load(std::memory_order_relaxed);
  return chosen > 0 ? chosen : default_threads();
}

int set_num_threads(int n) { return explicit_threads.exchange(n < 0 ? 0 : n); }

}  // namespace luminav::dispatch
