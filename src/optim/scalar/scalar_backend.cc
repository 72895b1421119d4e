// The scalar reference backend: core::ScalarOps over every element in index
// order; sums accumulated in double in element order (the reference the
// other backends are tested against).
#include "optim/scalar/scalar_backend.h"

#include <algorithm>
#include <cmath>

#include "optim/core/dtype_dispatch.h"
#include "optim/core/element_io.h"
#include "optim/core/factor_update.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/update_math.h"

namespace luminav {
namespace {

using core::ScalarOps;
using core::StepConstants;
using core::TensorGlobals;

using core::MomentLayout;
using core::SecondMoment;

// The element's moments and raw update under the tensor's layout (Note
// [second moment layouts]); `e` holds element_constants(k, layout).
struct ElementStepper {
  const StepConstants& e;
  const MomentLayout& layout;
  const TensorGlobals& gl;
  const core::UpdatedFactors& factors;
  const float* exp_avg_sq;

  core::ElementMoments<float> operator()(size_t i, float m_old, float g) const {
    const ScalarOps o;
    switch (layout.kind) {
      case SecondMoment::kElementwise:
        return core::clm_moments_and_update(o, e, m_old, exp_avg_sq[i], g);
      case SecondMoment::kTensor:
        return core::tdclm_moments_and_update(o, e, m_old, gl.second_moment, g);
      case SecondMoment::kRow:
        return core::tdclm_moments_and_update(o, e, m_old, factors.row[i / layout.cols], g);
      case SecondMoment::kFactored:
        return core::tdclm_moments_and_update(
            o, e, m_old,
            core::factored_vhat(o, factors.row[i / layout.cols], factors.col_over_rho[i % layout.cols]),
            g);
    }
    return {};
  }
};

template <int GradDtype>
float gradient(const StepConstants& k, const luminav_tensor& t, size_t i) {
  return core::scaled_gradient(ScalarOps(), k, core::load_as_f32<GradDtype>(t.grad, i));
}

// Round 0 of a kRow/kFactored tensor: each row's and each column's sum of
// g^2 in double, in element order (the columns in row order).
template <int GradDtype>
void sum_rows_and_columns(const StepConstants& k, const luminav_tensor& t, const MomentLayout& layout,
                          const TensorGlobals& gl, luminav_partials& out) {
  const bool columns = layout.kind == SecondMoment::kFactored;
  if (columns) std::fill(gl.col_sq_sums, gl.col_sq_sums + layout.cols, 0.0);
  double total = 0.0;
  for (size_t r = 0; r < layout.rows; ++r) {
    double row = 0.0;
    for (size_t c = 0; c < layout.cols; ++c) {
      const double g = gradient<GradDtype>(k, t, r * layout.cols + c);
      row += g * g;
      if (columns) gl.col_sq_sums[c] += g * g;
    }
    gl.row_sq_sums[r] = row;
    total += row;
  }
  out.grad_sq_sum = total;
  out.row_count = layout.rows;
  out.row_factor_sum = core::row_factor_sum(k, layout, t.exp_avg_sq, gl.row_sq_sums);
}

template <int ParamDtype, int GradDtype>
void reduce_tensor(const StepConstants& k, const luminav_tensor& t, int round,
                   const TensorGlobals& gl, luminav_partials& out) {
  const ScalarOps o;
  const size_t n = t.num_elements;
  const MomentLayout layout = core::moment_layout(k.tdclm, t);
  if (core::round_has_grad_sums(round)) {
    uint64_t nonfinite = 0;
    double grad_sq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const float g = gradient<GradDtype>(k, t, i);
      nonfinite += std::isfinite(g) ? 0 : 1;
      grad_sq += static_cast<double>(g) * static_cast<double>(g);
    }
    out.nonfinite_count = nonfinite;
    out.grad_sq_sum = grad_sq;
    if (core::has_row_factor(layout)) sum_rows_and_columns<GradDtype>(k, t, layout, gl, out);
  }
  if (core::round_has_update_sums(k, round)) {
    core::UpdatedFactors factors;
    if (core::has_row_factor(layout)) core::update_factors(k, layout, t.exp_avg_sq, gl, factors);
    const StepConstants e = core::element_constants(k, layout);
    const ElementStepper step{e, layout, gl, factors, t.exp_avg_sq};
    uint64_t agree = 0;
    double update_sq = 0.0;
    double weight_sq = 0.0;
    const bool weights = core::update_sums_need_weights(k);
    for (size_t i = 0; i < n; ++i) {
      const float g = gradient<GradDtype>(k, t, i);
      const auto el = step(i, t.exp_avg[i], g);
      agree += (el.u * g > 0.0f) ? 1 : 0;
      const double d = core::unscaled_step(o, e, el.u, g);
      update_sq += d * d;
      if (weights) {
        const float x = t.master ? t.master[i] : core::load_as_f32<ParamDtype>(t.param, i);
        weight_sq += static_cast<double>(x) * static_cast<double>(x);
      }
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
  const MomentLayout layout = core::moment_layout(k.tdclm, t);
  core::UpdatedFactors factors;
  if (core::has_row_factor(layout)) core::update_factors(k, layout, t.exp_avg_sq, gl, factors);
  const StepConstants e = core::element_constants(k, layout);
  const ElementStepper step{e, layout, gl, factors, t.exp_avg_sq};
  for (size_t i = 0; i < n; ++i) {
    const float g = gradient<GradDtype>(k, t, i);
    const float x = t.master ? t.master[i] : core::load_as_f32<ParamDtype>(t.param, i);
    const auto el = step(i, t.exp_avg[i], g);
    const float x_new = core::apply_update(o, e, gl, x, el.u, g);
    t.exp_avg[i] = el.m;
    if (layout.kind == SecondMoment::kElementwise) t.exp_avg_sq[i] = el.v;
    if (t.master) t.master[i] = x_new;
    core::store_param<ParamDtype>(t.param, i, x_new, k, t.seed, t.index_offset + i);
  }
  if (layout.kind == SecondMoment::kTensor) t.exp_avg_sq[0] = gl.second_moment;
  if (core::has_row_factor(layout)) core::store_factors(layout, factors, t.exp_avg_sq);
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
