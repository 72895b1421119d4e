// The per-thread stage record of a step (Note [host trace]).
#include "optim/dispatch/host_trace.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace luminav::dispatch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxStages = 16;

struct StageRecord {
  Clock::time_point begin;
  size_t count = 0;
  const char* labels[kMaxStages] = {};
  Clock::time_point ends[kMaxStages];
};

StageRecord& record_of_thread() {
  thread_local StageRecord record;
  return record;
}

}  // namespace

bool host_trace_enabled() {
  static const bool enabled = std::getenv("LUMINAV_TRACE_HOST") != nullptr;
  return enabled;
}

void host_trace_begin() {
  if (!host_trace_enabled()) return;
  StageRecord& r = record_of_thread();
  r.count = 0;
  r.begin = Clock::now();
}

void host_trace_mark(const char* label) {
  if (!host_trace_enabled()) return;
  StageRecord& r = record_of_thread();
  if (r.count == kMaxStages) return;  // a step has fewer stages; never overrun
  r.ends[r.count] = Clock::now();
  r.labels[r.count] = label;
  ++r.count;
}

size_t host_trace_stages(const char** labels, double* microseconds, size_t capacity) {
  const StageRecord& r = record_of_thread();
  Clock::time_point previous = r.begin;
  const size_t n = r.count < capacity ? r.count : capacity;
  for (size_t i = 0; i < n; ++i) {
    if (labels) labels[i] = r.labels[i];
    if (microseconds) microseconds[i] = std::chrono::duration<double, std::micro>(r.ends[i] - previous).count();
    previous = r.ends[i];
  }
  return r.count;
}

}  // namespace luminav::dispatch
