// Test hook for the crash-safety tests: LUMINAMOON_TEST_CRASH_AT=PHASE:N makes
// the process SIGKILL itself the N-th time it reaches the commit phase PHASE.
#pragma once

namespace luminamoon {

// Phases named by the commit protocol (see FusedPipeline's commit):
// "file_synced" (any durable file fsynced, not renamed), "part_renamed", "state_synced"
// (WAL and LSH index fsynced), "meta_written".
void crash_point(const char* phase);

}  // namespace luminamoon
