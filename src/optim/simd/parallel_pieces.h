// Runs a static partition of work on the oneTBB arena of the CPU backends,
// sized by luminav_get_num_threads() (dispatch/threads.h).
#pragma once

#include <functional>

namespace luminav::simd {

// Threads the CPU backend should use now (>= 1).
int worker_threads();

// Calls body(piece) for every piece in [0, pieces): inline on the calling
// thread when pieces <= 1, else as a tbb::parallel_for with a static
// partitioner inside a task_arena of worker_threads() slots (Note [threads]
// in parallel_pieces.cc). May throw what the body or TBB throws.
void run_pieces(int pieces, const std::function<void(int)>& body);

}  // namespace luminav::simd
