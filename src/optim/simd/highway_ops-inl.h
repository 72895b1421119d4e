// The Highway arithmetic policy of core/update_math.h: the same per-element
// templates the scalar backend runs, over hn::Vec lanes.
//
// Per-target header (Highway's toggle guard).
// Note [flatten]: the update_math.h templates are defined outside Highway's
// per-target pragma region, so GCC gives their instantiations no target
// attributes and refuses to inline an AVX2 always_inline function into them.
// The policy's members are therefore plain `inline` (no always_inline), and
// every kernel that calls the templates is LUMINAV_SIMD_FLATTEN: flattening
// inlines the template into the target-attributed kernel first and then the
// policy into that, so no call (and no by-memory vector argument) is left
// (checked with objdump on the kernels of every target).

#if defined(LUMINAV_SIMD_HIGHWAY_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LUMINAV_SIMD_HIGHWAY_OPS_INL_H_
#undef LUMINAV_SIMD_HIGHWAY_OPS_INL_H_
#else
#define LUMINAV_SIMD_HIGHWAY_OPS_INL_H_
#endif

#include "hwy/highway.h"
#include "optim/simd/accurate_tanh-inl.h"

#ifndef LUMINAV_SIMD_FLATTEN
#if defined(__GNUC__) || defined(__clang__)
#define LUMINAV_SIMD_FLATTEN __attribute__((flatten))
#else
#define LUMINAV_SIMD_FLATTEN
#endif
#endif

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Every operation is the correctly rounded IEEE one (no FMA contraction:
// step_kernels.cc is built with -ffp-contract=off), so lanes match the scalar
// backend bit for bit except where tanh or a reduction's summation order
// enters.
template <class D>
struct HighwayOps {
  using V = hn::Vec<D>;
  D d;

  inline V splat(float x) const { return hn::Set(d, x); }
  inline V add(V a, V b) const { return hn::Add(a, b); }
  inline V sub(V a, V b) const { return hn::Sub(a, b); }
  inline V mul(V a, V b) const { return hn::Mul(a, b); }
  inline V div(V a, V b) const { return hn::Div(a, b); }
  inline V sqrt(V a) const { return hn::Sqrt(a); }
  inline V abs(V a) const { return hn::Abs(a); }
  // As ScalarOps: a < b ? a : b (the operands are finite here).
  inline V min(V a, V b) const { return hn::IfThenElse(hn::Lt(a, b), a, b); }
  inline V max(V a, V b) const { return hn::IfThenElse(hn::Gt(a, b), a, b); }
  inline V neg(V a) const { return hn::Neg(a); }
  inline V tanh(V a) const { return accurate_tanh(d, a); }
  inline V keep_if_positive(V a, V v) const {
    return hn::IfThenElseZero(hn::Gt(a, hn::Zero(d)), v);
  }
};

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // LUMINAV_SIMD_HIGHWAY_OPS_INL_H_
