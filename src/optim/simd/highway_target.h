// The Highway target the simd backend runs on: its name, and the
// LUMINAV_SIMD_TARGET override.
#pragma once

#include <string>

namespace luminav::simd {

// Name of the target the kernels dispatch to now, e.g. "AVX2", "AVX3".
std::string current_target_name();

// Names of the targets compiled in and supported by this CPU, best first,
// comma-separated ("AVX3_DL,AVX3,AVX2,SSE4,SSSE3,SCALAR").
std::string available_target_names();

// Applies LUMINAV_SIMD_TARGET (read once per process) by disabling every
// better target. Returns false, with the reason, when it names no target
// that is compiled in and supported here. Unset or empty: true, no change.
bool apply_target_override(std::string* why_not);

}  // namespace luminav::simd
