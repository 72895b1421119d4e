// The crash hook of crash_point.h; costs one branch when the variable is unset.
#include "data/state/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace luminamoon {

void crash_point(const char* phase) {
  static const char* spec = std::getenv("LUMINAMOON_TEST_CRASH_AT");
  if (spec == nullptr) return;
  static std::atomic<long> hits{0};
  const char* colon = std::strrchr(spec, ':');
  if (colon == nullptr) return;
  if (std::string(spec, colon) != phase) return;
  long wanted = std::atol(colon + 1);
  if (hits.fetch_add(1) + 1 == wanted) ::kill(::getpid(), SIGKILL);
}

}  // namespace luminamoon
