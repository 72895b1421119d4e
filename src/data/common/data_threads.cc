// Thread count of the data engine's parallel stages.
#include "luminamoon/data_threads.h"

#include <atomic>
#include <cstdlib>
#include <thread>

namespace luminamoon {
namespace {
std::atomic<int> g_threads{0};

int default_threads() {
  if (const char* env = std::getenv("LUMINAMOON_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}
}  // namespace

void set_data_num_threads(int num_threads) { g_threads.store(num_threads > 0 ? num_threads : 0); }

int data_num_threads() {
  int n = g_threads.load();
  return n > 0 ? n : default_threads();
}

}  // namespace luminamoon
