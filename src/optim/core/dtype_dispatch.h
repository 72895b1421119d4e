// Turns a tensor's run-time dtypes into template arguments, once per tensor.
#pragma once

#include "luminav/luminav.h"

namespace luminav::core {

// Calls f.template operator()<ParamDtype, GradDtype>() for the tensor's
// (validated) dtypes, so that traversals branch once per tensor instead of
// once per element.
template <class F>
inline void with_dtypes(const luminav_tensor& t, F&& f) {
  auto with_grad = [&]<int P>() {
    switch (t.grad_dtype) {
      case LUMINAV_DTYPE_F32: f.template operator()<P, LUMINAV_DTYPE_F32>(); break;
      case LUMINAV_DTYPE_BF16: f.template operator()<P, LUMINAV_DTYPE_BF16>(); break;
      default: f.template operator()<P, LUMINAV_DTYPE_F16>(); break;
    }
  };
  switch (t.param_dtype) {
    case LUMINAV_DTYPE_F32: with_grad.template operator()<LUMINAV_DTYPE_F32>(); break;
    case LUMINAV_DTYPE_BF16: with_grad.template operator()<LUMINAV_DTYPE_BF16>(); break;
    default: with_grad.template operator()<LUMINAV_DTYPE_F16>(); break;
  }
}

}  // namespace luminav::core
