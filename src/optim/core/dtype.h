// Element types of parameters and gradients (LUMINAV_DTYPE_*): sizes and names.
#pragma once

#include <cstddef>

#include "luminav/luminav.h"
#include "optim/core/host_device.h"

namespace luminav::core {

// 0 for an unknown dtype.
LUMINAV_HD size_t dtype_size(int dtype) {
  switch (dtype) {
    case LUMINAV_DTYPE_F32: return 4;
    case LUMINAV_DTYPE_BF16: return 2;
    case LUMINAV_DTYPE_F16: return 2;
    default: return 0;
  }
}

inline const char* dtype_name(int dtype) {
  switch (dtype) {
    case LUMINAV_DTYPE_F32: return "f32";
    case LUMINAV_DTYPE_BF16: return "bf16";
    case LUMINAV_DTYPE_F16: return "f16";
    default: return "unknown";
  }
}

}  // namespace luminav::core
