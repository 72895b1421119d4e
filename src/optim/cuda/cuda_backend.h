// The CUDA backend: AOT kernels launched through the dlopen'ed driver.
#pragma once

#include <memory>
#include <string>

#include "optim/cuda/kernel_manifest.h"
#include "optim/dispatch/backend.h"

namespace luminav {

std::unique_ptr<Backend> make_cuda_backend();

namespace cuda {

// The artifact store the backend loads from: the directory named by
// LUMINAV_CUDA_KERNEL_DIR when set (kernels rebuilt or shipped apart from
// the library), else the kernels embedded in the library.
const ArtifactStore& active_artifact_store();

}  // namespace cuda
}  // namespace luminav
