// Where the host time of a step goes, stage by stage, kept in memory (LUMINAV_TRACE_HOST).
//
// Note [host trace]: a step's stages are timed only when LUMINAV_TRACE_HOST is
// set (read once per process). Each stage boundary stores a label and a
// steady_clock reading in the calling thread's fixed array; nothing is
// formatted or written while the step runs, so the trace's own cost is the
// clock reads (~20-30 ns each), not a write to a pipe that the next stage
// would be charged for. The caller reads the stages of its thread's last step
// afterwards (luminav_host_trace) and prints or keeps them.
#pragma once

#include <cstddef>

namespace luminav::dispatch {

bool host_trace_enabled();

// Starts the calling thread's record of a step (the stages of the previous
// step are dropped). No-op unless tracing.
void host_trace_begin();

// Ends the stage `label` (a string literal: stored, not copied) at now.
void host_trace_mark(const char* label);

// The calling thread's last step: up to `capacity` labels and their
// microseconds (each since the previous mark, the first since begin).
// Returns the number of stages recorded.
size_t host_trace_stages(const char** labels, double* microseconds, size_t capacity);

}  // namespace luminav::dispatch
