// The oneTBB arena of the simd backend and its static partition of pieces.
//
// Note [threads]: the backend never spawns threads of its own; it runs in a
// tbb::task_arena whose concurrency is luminav_get_num_threads() (the API
// setting, else LUMINAV_NUM_THREADS, else the core count), rebuilt when that
// setting changes. The work of one call is cut into at most that many
// contiguous pieces, assigned by tbb::static_partitioner, so a call never
// has more runnable threads than the setting: the calling thread takes one
// slot and TBB workers the rest. (The arena never has more slots than the
// machine has cores; a larger setting still gives the same pieces and the
// same bits, only fewer of them run at a time.)
// With torch: torch's intra-op pool (OpenMP in the CPU wheels) and this arena
// are separate pools of the same cores, and they do not compute at the same
// time because torch.optim calls the step synchronously between its own ops.
// Both default to the core count. To avoid oversubscription when torch runs
// with fewer threads, give both the same count: luminav_set_num_threads(
// torch.get_num_threads()) (Python: luminamoon._native.set_num_threads), or
// LUMINAV_NUM_THREADS equal to OMP_NUM_THREADS; and set OMP_WAIT_POLICY=PASSIVE
// if profiles show OpenMP workers still spinning while the step runs (libgomp
// spins for a while after each parallel region by default; docs/benchmarks-history.md
// has the measurement). Steps too small to pay for a wake-up run
// inline on the calling thread (simd_backend.cc, kMinPieceElements).

#include "optim/simd/parallel_pieces.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "optim/dispatch/threads.h"

namespace luminav::simd {
namespace {

// The arena of the current thread setting; callers hold a reference for the
// duration of their call, so a change of setting never destroys an arena in use.
std::shared_ptr<tbb::task_arena> arena_for(int setting) {
  // More slots than cores would only make TBB warn: the pieces (and so the
  // bits) follow the setting, the concurrency is capped by the machine.
  const int threads = std::max(1, std::min(setting, tbb::info::default_concurrency()));
  static std::mutex mutex;
  static std::shared_ptr<tbb::task_arena> arena;
  static int arena_threads = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (!arena || arena_threads != threads) {
    arena = std::make_shared<tbb::task_arena>(threads);
    arena_threads = threads;
  }
  return arena;
}

}  // namespace

int worker_threads() { return dispatch::num_threads(); }

void run_pieces(int pieces, const std::function<void(int)>& body) {
  if (pieces <= 0) return;
  if (pieces == 1) {
    body(0);
    return;
  }
  const std::shared_ptr<tbb::task_arena> arena = arena_for(worker_threads());
  arena->execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, pieces, 1),
        [&](const tbb::blocked_range<int>& range) {
          for (int piece = range.begin(); piece < range.end(); ++piece) body(piece);
        },
        tbb::static_partitioner());
  });
}

}  // namespace luminav::simd
