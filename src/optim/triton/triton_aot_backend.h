// The triton-aot backend (LUMINAV_FORCE_BACKEND=triton-aot, options->backend):
// luminav_step and luminav_step_multi on CUDA memory through the Triton AOT
// kernels, with no Python and no Triton at run time. Its kernel set is the CLM
// step of Note [AOT kernel set] (build_triton_aot.py); other modes, options and
// dtypes are refused with BACKEND_UNAVAILABLE naming what runs them.
#pragma once

#include <memory>
#include <string>

#include "optim/cuda/kernel_manifest.h"
#include "optim/dispatch/backend.h"

namespace luminav {

std::unique_ptr<Backend> make_triton_aot_backend();

}  // namespace luminav
