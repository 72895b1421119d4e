// The backends compiled into this build, their lazily probed availability,
// and the choice of backend for a call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "luminav/luminav.h"
#include "optim/core/status.h"
#include "optim/dispatch/backend.h"

namespace luminav::dispatch {

// Note [size routing]: the seed routes tensors of at least 16,384 elements
// to an accelerator. Here memory decides first: host pointers cannot be read
// by a discrete GPU and there is no host<->device copy path (a copy would
// cost more than the step), so host tensors stay on the CPU backends unless
// an accelerator reads host memory in place (Backend::offload(), e.g. Vulkan
// on unified memory); such a backend gets host tensors of at least this many
// elements. Device memory always goes to its GPU backend.
inline constexpr size_t kOffloadMinElements = 16384;

// Every backend name the project knows, compiled in or not.
inline constexpr std::string_view kKnownBackendNames[] = {"scalar", "simd", "cuda", "hip",
                                                          "vulkan", "triton-aot"};

size_t backend_count();
Backend& backend_at(size_t index);
// Probed once per process (thread-safe); `why_not` gets the one-line reason.
bool backend_available(size_t index, std::string* why_not = nullptr);
// nullptr when no backend of that name is compiled in.
Backend* find_backend(std::string_view name);

// The backend for a call: options->backend when given and not "auto", else
// LUMINAV_FORCE_BACKEND when set and not "auto", else automatic by
// options->device_type (CPU: an offload backend for large tensors, then simd
// when available, then scalar; CUDA: cuda; ROCm: hip). Forcing an unknown
// name is INVALID_ARGUMENT naming the known ones; forcing a backend that is
// not compiled in or cannot run here is BACKEND_UNAVAILABLE with the reason;
// a backend whose memory differs from device_type is INVALID_ARGUMENT.
// `sample` (may be nullptr) is a buffer of the call: an offload backend is
// skipped when a device backend serves that memory (CUDA memory is CUDA's).
core::Status select_backend(const luminav_options* options, size_t total_elements,
                            Backend** chosen, const void* sample = nullptr);

// "name" or "name:detail" of a backend, as luminav_last_backend() reports.
std::string backend_label(const Backend& backend);

}  // namespace luminav::dispatch
