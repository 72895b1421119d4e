// The LuminaV per-element update (spec/luminav-update.md), written once.
//
// Note [one math, many traversals]: every backend calls these templates with
// its own arithmetic policy `Ops`: ScalarOps (float, used by the scalar
// backend and by CUDA/HIP device code) or a Highway vector policy (simd/).
// A policy provides, over its lane type V:
//   splat(float) add sub mul div sqrt abs min max neg tanh
//   keep_if_positive(a, v)   -> v where a > 0, else 0
// Per-tensor options are uniform branches (the same for every lane); `K` is
// StepConstants, or PlainStep (step_variant.h), which makes the options of
// the common step compile-time constants so that their branches vanish.
#pragma once

#include <cmath>

#include "optim/core/host_device.h"
#include "optim/core/step_constants.h"

namespace luminav::core {

struct ScalarOps {
  using V = float;
  LUMINAV_HD V splat(float x) const { return x; }
  LUMINAV_HD V add(V a, V b) const { return a + b; }
  LUMINAV_HD V sub(V a, V b) const { return a - b; }
  LUMINAV_HD V mul(V a, V b) const { return a * b; }
  LUMINAV_HD V div(V a, V b) const { return a / b; }
  LUMINAV_HD V sqrt(V a) const { return ::sqrtf(a); }
  LUMINAV_HD V abs(V a) const { return ::fabsf(a); }
  LUMINAV_HD V min(V a, V b) const { return a < b ? a : b; }
  LUMINAV_HD V max(V a, V b) const { return a > b ? a : b; }
  LUMINAV_HD V neg(V a) const { return -a; }
  // Note [scalar tanh accuracy]: the spec asks for 2 ulp in fp32. glibc's tanhf
  // measures 2.19 ulp over [0, 12], so the host evaluates in double and rounds
  // once (<= 0.5 ulp + 2^-29, saturating, never NaN). CUDA's tanhf is documented
  // at <= 2 ulp and stays on the device's fast path.
  LUMINAV_HD V tanh(V a) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return ::tanhf(a);
#else
    return static_cast<float>(::tanh(static_cast<double>(a)));
#endif
  }
  LUMINAV_HD V keep_if_positive(V a, V v) const { return a > 0.0f ? v : 0.0f; }
};

// The gradient as the step reads it (spec "Gradient scale"): g * fp32(1/sigma),
// before anything else (the finite check included); no multiply at sigma = 1.
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V scaled_gradient(const Ops& o, const K& k, V g) {
  return k.inv_grad_scale == 1.0f ? g : o.mul(g, o.splat(k.inv_grad_scale));
}

// Step 1: the new first moment.
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V first_moment(const Ops& o, const K& k, V m_old, V g) {
  return o.add(o.mul(o.splat(k.beta1), m_old), o.mul(o.splat(k.one_minus_beta1), g));
}

// Step 1 (CLM): the new second moment.
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V second_moment(const Ops& o, const K& k, V v_old, V g) {
  return o.add(o.mul(o.splat(k.beta2), v_old), o.mul(o.mul(o.splat(k.one_minus_beta2), g), g));
}

// TD-CLM factor update (spec "TD-CLM second moment"): the mean of a row's or
// column's g^2 (or, td_factor tensor, of all of them) is formed in double
// from the sum and rounded once; the EMA is fp32, as every moment.
LUMINAV_HD float factor_mean(double sq_sum, double count) {
  return static_cast<float>(sq_sum / count);
}
template <class K>
LUMINAV_HD float factor_ema(const K& k, float old, float mean) {
  return k.beta2 * old + k.one_minus_beta2 * mean;
}
// col_c / rho, the per-column part of vhat_i = row_r * col_c / rho (0 where
// rho = 0, where every row factor is 0 too).
LUMINAV_HD float column_over_rho(float col, float rho) {
  return rho > 0.0f ? col / rho : 0.0f;
}
// vhat_i of td_factor factored from its row factor and its column's col/rho.
template <class Ops, class V = typename Ops::V>
LUMINAV_HD V factored_vhat(const Ops& o, V row, V col_over_rho) {
  return o.mul(row, col_over_rho);
}

// Steps 1-2: the raw update u from the new moments; `second` is v_i (CLM),
// the element's vhat (TD-CLM) or the splatted tensor scalar s (TD-CLM
// tensor). Soft clip applied when tau > 0.
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V raw_update(const Ops& o, const K& k, V m, V second, V g) {
  V n = o.mul(m, o.splat(k.inv_bias_correction1));
  if (k.lam != 0.0f) {
    n = o.add(o.mul(o.splat(k.one_minus_lam), n), o.mul(o.splat(k.lam), g));
  }
  const V den = o.add(o.sqrt(o.mul(second, o.splat(k.inv_bias_correction2))), o.splat(k.eps));
  V u = o.div(n, den);
  if (k.tau > 0.0f) {
    u = o.mul(o.splat(k.tau), o.tanh(o.div(u, o.splat(k.tau))));
  }
  return u;
}

// Step 3 without the global scale: u * phi (phi = 1 where u*g > 0).
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V cautious_masked(const Ops& o, const K& k, V u, V g) {
  return k.cautious ? o.keep_if_positive(o.mul(u, g), u) : u;
}

// Steps 1-2 of one element: the new moments and the raw update. In TD-CLM
// `v_old` is ignored and the tensor scalar s (already updated by the
// reduction) stands in for v.
template <class V>
struct ElementMoments {
  V m;  // new first moment
  V v;  // CLM: new second moment; TD-CLM: s
  V u;  // raw update after the soft clip
};

// CLM (and TD-CLM with one element per row): v from v_old.
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD ElementMoments<V> clm_moments_and_update(const Ops& o, const K& k, V m_old, V v_old,
                                                    V g) {
  ElementMoments<V> r;
  r.m = first_moment(o, k, m_old, g);
  r.v = second_moment(o, k, v_old, g);
  r.u = raw_update(o, k, r.m, r.v, g);
  return r;
}

// TD-CLM: the element's second moment vhat is given (already updated).
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD ElementMoments<V> tdclm_moments_and_update(const Ops& o, const K& k, V m_old, V vhat,
                                                      V g) {
  ElementMoments<V> r;
  r.m = first_moment(o, k, m_old, g);
  r.v = vhat;
  r.u = raw_update(o, k, r.m, r.v, g);
  return r;
}

// CLM, or TD-CLM with the tensor scalar s (k.tdclm).
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD ElementMoments<V> moments_and_update(const Ops& o, const K& k,
                                                const TensorGlobals& gl, V m_old, V v_old, V g) {
  return k.tdclm ? tdclm_moments_and_update(o, k, m_old, o.splat(gl.second_moment), g)
                 : clm_moments_and_update(o, k, m_old, v_old, g);
}

// The step before the cautious scale and the tensor bound, lr * u * phi:
// what the reductions sum the squares of (luminav_partials.update_sq_sum).
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V unscaled_step(const Ops& o, const K& k, V u, V g) {
  return o.mul(o.splat(k.lr), cautious_masked(o, k, u, g));
}

// Steps 3-5: the new working weight from x before the step and u.
template <class Ops, class K, class V = typename Ops::V>
LUMINAV_HD V apply_update(const Ops& o, const K& k, const TensorGlobals& gl,
                          V x, V u, V g) {
  if (k.cautious) {
    u = o.mul(o.keep_if_positive(o.mul(u, g), u), o.splat(gl.cautious_scale));
  }
  V d = o.mul(o.splat(k.lr), u);
  if (scales_whole_step(k.bound_mode)) {
    d = o.mul(d, o.splat(gl.bound_scale));
  } else if (k.bound_mode == LUMINAV_BOUND_ELEMENT) {
    const V b = o.mul(o.splat(k.bound_ratio), o.sqrt(o.add(o.mul(x, x), o.splat(1e-4f))));
    d = o.min(o.max(d, o.neg(b)), b);
  }
  return o.sub(o.mul(x, o.splat(k.decay_factor)), d);
}

}  // namespace luminav::core
