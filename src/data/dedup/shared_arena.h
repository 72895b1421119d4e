// One long-lived oneTBB arena per thread count, so that per-batch calls do not
// pay for creating and tearing down worker threads.
#pragma once

#include <tbb/task_arena.h>

namespace luminamoon {

// The arena of `num_threads` threads (0: data_num_threads()); created on
// first use, kept for the life of the process; safe to call from any thread.
tbb::task_arena& shared_arena(int num_threads);

}  // namespace luminamoon
