/* Diagnostics of libluminav: where the host time of a step goes.
 * Its own header, so that adding to it recompiles nothing else. */
#ifndef LUMINAV_LUMINAV_TRACE_H
#define LUMINAV_LUMINAV_TRACE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* With LUMINAV_TRACE_HOST set (read once per process): the host stages of
 * this thread's last luminav_step_groups call (validation, work lists,
 * backend choice, then the backend's part: reduce and apply on the host, the
 * asynchronous groups and the backend's step on a device), up to `capacity`
 * of them: their names (static strings) and microseconds each, the first
 * since the call began. Returns how many were recorded (0 when not tracing).
 * The stages are timed in memory and read afterwards: the trace's own writes
 * are in no stage. Either array may be NULL. */
size_t luminav_host_trace(const char** stages, double* microseconds, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* LUMINAV_LUMINAV_TRACE_H */
