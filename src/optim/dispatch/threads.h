// The thread count of the CPU backends (luminav_set_num_threads).
#pragma once

namespace luminav::dispatch {

// Threads a CPU backend should use now: the caller's setting, else
// LUMINAV_NUM_THREADS (read once), else std::thread::hardware_concurrency().
// Always >= 1.
int num_threads();

// 0 restores the default; returns the previous setting (0 when it was the
// default). Negative values are rejected by the C API before reaching here.
int set_num_threads(int num_threads);

}  // namespace luminav::dispatch
