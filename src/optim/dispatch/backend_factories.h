// Constructors of the optional backends; each exists only when its folder
// compiles in and defines LUMINAV_HAS_<NAME>_BACKEND on target luminav.
// Constructing a backend must be cheap and must not probe hardware: probing
// happens lazily in Backend::available().
#pragma once

#include <memory>

#include "optim/dispatch/backend.h"

namespace luminav {

std::unique_ptr<Backend> make_scalar_backend();
std::unique_ptr<Backend> make_simd_backend();
std::unique_ptr<Backend> make_cuda_backend();
std::unique_ptr<Backend> make_hip_backend();
std::unique_ptr<Backend> make_vulkan_backend();
std::unique_ptr<Backend> make_triton_aot_backend();

}  // namespace luminav
