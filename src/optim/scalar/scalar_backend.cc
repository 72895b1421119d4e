// The scalar reference backend: core::ScalarOps over every element in index
// order; sums accumulated in double in element order (the reference the
// other backends are tested against).
#include "optim/scalar/scalar_backend.h"

#include <cmath>

#include "optim/core/dtype_dispatch.h"
#include "optim/core/element_io.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/update_math.h"

namespace luminav {
namespace {

using core::ScalarOps;
using core::StepConstants;
using core::TensorGlobals;

template <int ParamDtype, int GradDtype>
void reduce_tensor(const StepConstants& k, const luminav_tensor& t, int round,
                   const TensorGlobals& gl, luminav_partials& out) {
  const ScalarOps o;
  const size_t n = t.num_elements;
  if (core::round_has_grad_sums(round)) {
    uint64_t nonfinite = 0;
    double grad_sq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const float g = core::load_as_f32<GradDtype>(t.grad, i);
      nonfinite += std::isfinite(g) ? 0 : 1;
      grad_sq += static_cast<double>(g) * static_cast<double>(g);
    }
    out.nonfinite_count = nonfinite;
    out.grad_sq_sum = grad_sq;
  }
  if (core::round_has_update_sums(k, round)) {
    uint64_t agree = 0;
    double update_sq = 0.0;
    double weight_sq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const float g = core::load_as_f32<GradDtype>(t.grad, i);
      const float x = t.master ? t.master[i] : core::load_as_f32<ParamDtype>(t.param, i);
      const float v_old = k.tdclm ? 0.0f : t.exp_avg_sq[i];
      const auto e = core::moments_and_update(o, k, gl, t.exp_avg[i], v_old, g);
      agree += (e.u * g > 0.0f) ? 1 : 0;
      const double d = core::unscaled_step(o, k, e.u, g);
      update_sq += d * d;
      weight_sq += static_cast<double>(x) * static_cast<double>(x);
    }
    out.agree_count = agree;
    out.update_sq_sum = update_sq;
    out.weight_sq_sum = weight_sq;
  }
}

template <int ParamDtype, int GradDtype>
void apply_tensor(const StepConstants& k, const luminav_tensor& t, const TensorGlobals& gl) {
  const ScalarOps o;
  const size_t n = t.num_elements;
  for (size_t i = 0; i < n; ++i) {
    const float g = core::load_as_f32<GradDtype>(t.grad, i);
    const float x = t.master ? t.master[i] : core::load_as_f32<ParamDtype>(t.param, i);
    const float v_old = k.tdclm ? 0.0f : t.exp_avg_sq[i];
    const auto e = core::moments_and_update(o, k, gl, t.exp_avg[i], v_old, g);
    const float x_new = core::apply_update(o, k, gl, x, e.u, g);
    t.exp_avg[i] = e.m;
    if (!k.tdclm) t.exp_avg_sq[i] = e.v;
    if (t.master) t.master[i] = x_new;
    core::store_param<ParamDtype>(t.param, i, x_new, k, t.seed, t.index_offset + i);
  }
  if (k.tdclm && n > 0) t.exp_avg_sq[0] = gl.second_moment;
}

class ScalarBackend final : public Backend {
 public:
  std::string_view name() const override { return "scalar"; }
  bool available(std::string* why_not) const override {
    if (why_not) why_not->clear();
    return true;
  }
  int device_type() const override { return LUMINAV_DEVICE_CPU; }

  int reduce(const StepConstants& k, std::span<const luminav_tensor> tensors, int round,
             std::span<const TensorGlobals> globals, std::span<luminav_partials> out,
             const ExecContext&) override {
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      out[ti] = luminav_partials{};
      core::with_dtypes(tensors[ti], [&]<int P, int G>() {
        reduce_tensor<P, G>(k, tensors[ti], round, globals[ti], out[ti]);
      });
    }
    return LUMINAV_STATUS_OK;
  }

  int apply(const StepConstants& k, std::span<const luminav_tensor> tensors,
            std::span<const TensorGlobals> globals, const ExecContext&) override {
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      core::with_dtypes(tensors[ti], [&]<int P, int G>() { apply_tensor<P, G>(k, tensors[ti], globals[ti]); });
    }
    return LUMINAV_STATUS_OK;
  }
};

}  // namespace

std::unique_ptr<Backend> make_scalar_backend() { return std::make_unique<ScalarBackend>(); }

}  // namespace luminav
