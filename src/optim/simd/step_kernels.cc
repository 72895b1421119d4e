// Highway kernels of the LuminaV step (pass-1 reductions, pass-2 apply),
// written once and compiled for every target Highway offers (foreach_target).
//
// Note [bytes moved]: per element, with 4-byte fp32 state and P/G the bytes
// of a parameter/gradient element (4 for fp32, 2 for bf16/fp16):
//   pass 2 (apply), one pass over memory:
//     CLM:    read g (G), x (P or master 4), m (4), v (4);
//             write param (P), m (4), v (4) [+ master 4]
//             fp32:                 4 + 4+4 + 4+4 + 4+4       = 28 B
//             bf16 param + master:  2 + 4+4 + 4+4 + 4+4 + 2   = 28 B (param not read)
//     TD-CLM: as CLM without v:     fp32 20 B, bf16 + master 20 B
//   pass 1 (reduce), read-only, only when the step needs a reduction
//   (finite check, TD-CLM, cautious, tensor bound; core/reduction_rounds.h):
//     round with the gradient sums (finite check, sum g^2):   G
//     round with the update sums (K, norms; recomputes u):    G + P|4 + 4 [+ 4 CLM]
// So a default CLM step (finite check on) moves 4 + 28 = 32 B per fp32
// element and 2 + 28 = 30 B with bf16 parameters/gradients and a master;
// TD-CLM 4 + 20 = 24 B and 2 + 20 = 22 B. Without a reduction (CLM with the
// check off) a step is the single apply pass. bench/optim_bandwidth.py
// divides these counts by the measured copy bandwidth to get the floor.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "optim/core/dtype_dispatch.h"
#include "optim/core/element_io.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/step_variant.h"
#include "optim/core/update_math.h"
#include "optim/simd/step_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optim/simd/step_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "optim/simd/half_convert-inl.h"
#include "optim/simd/highway_ops-inl.h"
#include "optim/simd/stochastic_hash-inl.h"

HWY_BEFORE_NAMESPACE();
namespace luminav::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using core::StepConstants;
using core::TensorGlobals;

// How an element of a dtype is stored.
template <int Dtype>
using Stored = std::conditional_t<Dtype == LUMINAV_DTYPE_F32, float, uint16_t>;

template <int Dtype, class D>
HWY_INLINE hn::Vec<D> load_f32(D d, const void* base, size_t i) {
  if constexpr (Dtype == LUMINAV_DTYPE_F32) {
    return hn::LoadU(d, static_cast<const float*>(base) + i);
  } else {
    const auto h = load_u16_as_u32(d, static_cast<const uint16_t*>(base) + i);
    if constexpr (Dtype == LUMINAV_DTYPE_BF16) {
      return bf16_to_f32(d, h);
    } else {
      return f16_to_f32(d, h);
    }
  }
}

// The gradient as the step reads it (core::scaled_gradient).
template <int G, class K, class D>
HWY_INLINE hn::Vec<D> load_gradient(D d, const HighwayOps<D>& o, const K& k, const void* base,
                                    size_t i) {
  return core::scaled_gradient(o, k, load_f32<G>(d, base, i));
}

// The parameter in its own dtype: as is, RNE, or the spec's stochastic
// rounding keyed on the logical index of lane 0.
template <int Dtype, class D>
HWY_INLINE void store_param(D d, hn::Vec<D> x, void* base, size_t i, bool stochastic,
                            const RoundingStream<D>& draws, uint64_t logical_index) {
  if constexpr (Dtype == LUMINAV_DTYPE_F32) {
    (void)stochastic;
    (void)draws;
    (void)logical_index;
    hn::StoreU(x, d, static_cast<float*>(base) + i);
  } else {
    BitsOf<D> bits;
    if (stochastic) {
      const BitsOf<D> r = draws.bits(d, logical_index);
      if constexpr (Dtype == LUMINAV_DTYPE_BF16) {
        bits = f32_to_bf16_stochastic(d, x, r);
      } else {
        bits = f32_to_f16_stochastic(d, x, r);
      }
    } else if constexpr (Dtype == LUMINAV_DTYPE_BF16) {
      bits = f32_to_bf16_rne(d, x);
    } else {
      bits = f32_to_f16_rne(d, x);
    }
    store_u32_as_u16(d, bits, static_cast<uint16_t*>(base) + i);
  }
}

// The buffers of one tensor, indexed from the same element.
struct Buffers {
  void* param;
  const void* grad;
  float* m;
  float* v;       // CLM only
  float* master;  // optional
};

// The last, partial vector of a range runs through the full-width code on
// zero-padded copies: no masked memory access is needed on any target, and
// zero lanes add nothing to any reduction (g = 0 gives u = 0 and x = 0).
// Note [tail copies]: a step over many tiny tensors (1,000 of 4 elements) is
// all tails, so the stage is filled and emptied lane by lane, with fixed
// trip counts and no library call: a memset of the whole stage and a memcpy
// per buffer cost more than the vector of arithmetic they feed.
template <class T, size_t kLanes>
HWY_INLINE void stage_lanes(T (&stage)[kLanes], const T* src, size_t count) {
  for (size_t j = 0; j < kLanes; ++j) stage[j] = j < count ? src[j] : T(0);
}

template <class T, size_t kLanes>
HWY_INLINE void unstage_lanes(const T (&stage)[kLanes], T* dst, size_t count) {
  for (size_t j = 0; j < kLanes; ++j) {
    if (j < count) dst[j] = stage[j];
  }
}

template <int P, int G>
struct TailStage {
  static constexpr size_t kLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN Stored<P> param[kLanes];
  HWY_ALIGN Stored<G> grad[kLanes];
  HWY_ALIGN float m[kLanes];
  HWY_ALIGN float v[kLanes];
  HWY_ALIGN float master[kLanes];

  // Only the buffers present are staged; the others stay null.
  Buffers copy_in(const Buffers& src, size_t at, size_t count) {
    stage_lanes(param, static_cast<const Stored<P>*>(src.param) + at, count);
    stage_lanes(grad, static_cast<const Stored<G>*>(src.grad) + at, count);
    stage_lanes(m, src.m + at, count);
    if (src.v) stage_lanes(v, src.v + at, count);
    if (src.master) stage_lanes(master, src.master + at, count);
    return Buffers{param, grad, m, src.v ? v : nullptr, src.master ? master : nullptr};
  }

  void copy_out(const Buffers& dst, size_t at, size_t count) const {
    unstage_lanes(param, static_cast<Stored<P>*>(dst.param) + at, count);
    unstage_lanes(m, dst.m + at, count);
    if (dst.v) unstage_lanes(v, dst.v + at, count);
    if (dst.master) unstage_lanes(master, dst.master + at, count);
  }
};

inline Buffers buffers_of(const luminav_tensor& t, const StepConstants& k) {
  return Buffers{t.param, t.grad, t.exp_avg, k.tdclm ? nullptr : t.exp_avg_sq, t.master};
}

// The streams an update-sum loop prefetches: the weights only where the
// tensor bound's ||x|| needs them (core::update_sums_need_weights).
inline Buffers update_sum_streams(Buffers b, const StepConstants& k) {
  if (!core::update_sums_need_weights(k)) b.param = b.master = nullptr;
  return b;
}

// Note [software prefetch]: a loop that computes between its loads (the
// apply pass; a pass 1 with sums of squares in double or the update
// recomputed) falls behind the memory stream on this class of machine unless
// it asks for its lines ahead: the hardware prefetcher alone does not keep
// enough lines in flight. Each such loop prefetches every stream it reads
// 1,024 elements (4 KiB of fp32) ahead. Measured at 2^26 on the 2-core
// AVX-512 VM (docs/benchmarks-history.md, issue 3, third session): the finite check
// plus sum g^2 32 -> 26 ms on one core (a bare read: 22 ms); on two, the
// apply pass of CLM fp32 (check off) 44.4-45.1 -> 41.8-42.3 ms and of TD-CLM
// bf16 + master with stochastic rounding 44.7-45.5 -> 32.8-33.8 ms.
// Distances from 512 to 4,096 elements measure alike; prefetching the
// write-only bf16 parameter gains nothing, and the bare finite check (a load,
// an AND and a max per vector) gains nothing either, so it does not prefetch.
constexpr size_t kPrefetchAhead = 1024;  // elements

// Prefetches the gradient at element i and, with kAllStreams, the weight
// (master or parameter) and the moments: what the loop will read there.
template <int P, int G, bool kAllStreams>
HWY_INLINE void prefetch_streams(const Buffers& b, size_t i) {
  hwy::Prefetch(static_cast<const Stored<G>*>(b.grad) + i);
  if constexpr (kAllStreams) {
    if (b.master) {
      hwy::Prefetch(b.master + i);
    } else if (b.param) {
      hwy::Prefetch(static_cast<const Stored<P>*>(b.param) + i);
    }
    hwy::Prefetch(b.m + i);
    if (b.v) hwy::Prefetch(b.v + i);
  }
}

// Calls body(i) for every whole vector of [begin, end) in order and returns
// where the last, partial vector starts. With kPrefetch each call but the
// last kPrefetchAhead elements' is preceded by prefetch_streams<P, G,
// kAllStreams> at i + kPrefetchAhead (never past `end`).
template <int P, int G, bool kPrefetch, bool kAllStreams, class Body>
HWY_INLINE size_t for_each_vector(const Buffers& b, size_t begin, size_t end, size_t lanes,
                                  const Body& body) {
  size_t i = begin;
  if constexpr (kPrefetch) {
    const size_t prefetched_end = end > kPrefetchAhead ? end - kPrefetchAhead : 0;
    for (; i + lanes <= prefetched_end; i += lanes) {
      prefetch_streams<P, G, kAllStreams>(b, i + kPrefetchAhead);
      body(i);
    }
  }
  for (; i + lanes <= end; i += lanes) body(i);
  return i;
}

// ---- pass 2 -------------------------------------------------------------------

// The element's moments: from v_old or the tensor scalar s
// (core::moments_and_update), or, kGivenVhat, from the row/factored vhat.
template <bool kGivenVhat, class K, class D>
HWY_INLINE core::ElementMoments<hn::Vec<D>> element_moments(D d, const HighwayOps<D>& o, const K& k,
                                                            const TensorGlobals& gl, const Buffers& b,
                                                            size_t i, hn::Vec<D> g, hn::Vec<D> vhat) {
  if constexpr (kGivenVhat) {
    return core::tdclm_moments_and_update(o, k, hn::LoadU(d, b.m + i), vhat, g);
  } else {
    // v before m, as this loop has always read them (its instruction count
    // is the CLM step's: bench/optim_simd_throughput.py, issue 14).
    (void)vhat;
    const auto v_old = b.v ? hn::LoadU(d, b.v + i) : hn::Zero(d);
    return core::moments_and_update(o, k, gl, hn::LoadU(d, b.m + i), v_old, g);
  }
}

template <int P, int G, bool kGivenVhat = false, class K, class D>
HWY_INLINE void apply_vector(D d, const HighwayOps<D>& o, const K& k,
                             const TensorGlobals& gl, const Buffers& b, size_t i, bool stochastic,
                             const RoundingStream<D>& draws, uint64_t logical_index,
                             hn::Vec<D> vhat) {
  const auto g = load_gradient<G>(d, o, k, b.grad, i);
  const auto x = b.master ? hn::LoadU(d, b.master + i) : load_f32<P>(d, b.param, i);
  const auto e = element_moments<kGivenVhat>(d, o, k, gl, b, i, g, vhat);
  const auto x_new = core::apply_update(o, k, gl, x, e.u, g);
  hn::StoreU(e.m, d, b.m + i);
  if (b.v) hn::StoreU(e.v, d, b.v + i);
  if (b.master) hn::StoreU(x_new, d, b.master + i);
  store_param<P>(d, x_new, b.param, i, stochastic, draws, logical_index);
}

// K: StepConstants or core::PlainStep (Note [plain steps]).
template <int P, int G, class K>
LUMINAV_SIMD_FLATTEN void apply_typed(const K& k_in, const TensorGlobals& gl_in,
                                      const luminav_tensor& t, size_t begin, size_t end) {
  // Local copies: stores through the float buffers cannot alias them, so the
  // uniform option branches and constants stay in registers.
  const K k = k_in;
  const TensorGlobals gl = gl_in;
  using D = hn::ScalableTag<float>;
  const D d;
  const HighwayOps<D> o{d};
  const RoundingStream<D> draws(d, t.seed, k.step);
  const bool stochastic = k.stochastic_rounding != 0;
  const Buffers b = buffers_of(t, k);
  const size_t lanes = hn::Lanes(d);
  const size_t i = for_each_vector<P, G, /*kPrefetch=*/true, /*kAllStreams=*/true>(
      b, begin, end, lanes,
      [&](size_t at) {
        apply_vector<P, G>(d, o, k, gl, b, at, stochastic, draws, t.index_offset + at, hn::Zero(d));
      });
  if (i < end) {
    TailStage<P, G> tail;
    const size_t count = end - i;
    const Buffers staged = tail.copy_in(b, i, count);
    apply_vector<P, G>(d, o, k, gl, staged, 0, stochastic, draws, t.index_offset + i, hn::Zero(d));
    tail.copy_out(b, i, count);
  }
}

// Note [row segments]: a row/factored tensor is walked row by row: each row's
// whole vectors with vhat = row_r (times col_c / rho, loaded beside the
// column, when factored), its last partial vector through the zero-padded
// tail (TailStage) with vhat staged lane by lane. Rows whose length is not a
// multiple of the vector pay one staged vector each; the spec's
// tensors (C = width of a layer) are multiples of 16 nearly always.
template <bool kFactored, class D, class Whole, class Partial>
HWY_INLINE void for_each_row_segment(D d, const HighwayOps<D>& o, const FactorView& f,
                                     size_t begin, size_t end, const Whole& whole,
                                     const Partial& partial) {
  const size_t lanes = hn::Lanes(d);
  size_t i = begin;
  for (size_t r = begin / f.cols; i < end; ++r) {
    const size_t row_start = r * f.cols;
    const size_t row_end = std::min<size_t>(end, row_start + f.cols);
    const auto row = hn::Set(d, f.row[r]);
    for (; i + lanes <= row_end; i += lanes) {
      if constexpr (kFactored) {
        whole(i, core::factored_vhat(o, row, hn::LoadU(d, f.col_over_rho + (i - row_start))));
      } else {
        whole(i, row);
      }
    }
    if (i < row_end) {
      HWY_ALIGN float staged[HWY_MAX_BYTES / sizeof(float)] = {};
      for (size_t j = 0; j < row_end - i; ++j) {
        staged[j] = kFactored ? core::factored_vhat(core::ScalarOps(), f.row[r],
                                                    f.col_over_rho[i - row_start + j])
                              : f.row[r];
      }
      partial(i, row_end - i, hn::Load(d, staged));
      i = row_end;
    }
  }
}

template <int P, int G, bool kFactored, class K>
LUMINAV_SIMD_FLATTEN void apply_factored_typed(const K& k_in, const TensorGlobals& gl_in,
                                               const luminav_tensor& t, const FactorView& f,
                                               size_t begin, size_t end) {
  const K k = k_in;
  const TensorGlobals gl = gl_in;
  using D = hn::ScalableTag<float>;
  const D d;
  const HighwayOps<D> o{d};
  const RoundingStream<D> draws(d, t.seed, k.step);
  const bool stochastic = k.stochastic_rounding != 0;
  const Buffers b{t.param, t.grad, t.exp_avg, nullptr, t.master};
  for_each_row_segment<kFactored>(
      d, o, f, begin, end,
      [&](size_t at, hn::Vec<D> vhat) {
        // Note [software prefetch], across row boundaries.
        if (at + kPrefetchAhead < end) prefetch_streams<P, G, true>(b, at + kPrefetchAhead);
        apply_vector<P, G, true>(d, o, k, gl, b, at, stochastic, draws, t.index_offset + at, vhat);
      },
      [&](size_t at, size_t count, hn::Vec<D> vhat) {
        TailStage<P, G> tail;
        const Buffers staged = tail.copy_in(b, at, count);
        apply_vector<P, G, true>(d, o, k, gl, staged, 0, stochastic, draws, t.index_offset + at, vhat);
        tail.copy_out(b, at, count);
      });
}

// ---- pass 1 -------------------------------------------------------------------

// Double lanes that hold the squares of half a float vector each (a 1-lane
// target has one double lane for its one float).
#if HWY_TARGET == HWY_SCALAR
template <class D>
using WideD = hn::Rebind<double, D>;
#else
template <class D>
using WideD = hn::Rebind<double, hn::Half<D>>;
#endif

// Sums of squares in double: fp32 squares are exact in double, so only the
// additions round, in a fixed lane-wise order.
template <class D>
struct SquareSum {
  hn::Vec<WideD<D>> lo, hi;

  explicit SquareSum(D) : lo(hn::Zero(WideD<D>())), hi(hn::Zero(WideD<D>())) {}

  HWY_INLINE void add(D d, hn::Vec<D> x) {
    const WideD<D> dw;
#if HWY_TARGET == HWY_SCALAR
    (void)d;
    const auto w = hn::PromoteTo(dw, x);
    lo = hn::MulAdd(w, w, lo);
#else
    const hn::Half<D> dh;
    const auto wl = hn::PromoteTo(dw, hn::LowerHalf(dh, x));
    const auto wh = hn::PromoteTo(dw, hn::UpperHalf(dh, x));
    lo = hn::MulAdd(wl, wl, lo);
    hi = hn::MulAdd(wh, wh, hi);
#endif
  }

  HWY_INLINE double total() const {
    const WideD<D> dw;
    return hn::GetLane(hn::SumOfLanes(dw, hn::Add(lo, hi)));
  }
};

template <class D>
struct ReduceAccumulators {
  // Note [finite check by the largest magnitude]: a gradient element is NaN
  // or +-Inf exactly when its magnitude's bit pattern is >= that of +Inf, so
  // pass 1 keeps the lane-wise maximum of |g|'s bits (one AND and one integer
  // max per vector, no mask-to-count per vector) and counts the non-finite
  // elements only on the failing path.
  hn::Vec<hn::RebindToSigned<D>> magnitude_bits;
  uint64_t agree = 0;
  SquareSum<D> grad_sq, update_sq, weight_sq;
  explicit ReduceAccumulators(D d)
      : magnitude_bits(hn::Zero(hn::RebindToSigned<D>())), grad_sq(d), update_sq(d), weight_sq(d) {}
};

constexpr int32_t kInfinityBits = 0x7f800000;

template <int P, int G, bool kGradSums, bool kGradSq, bool kUpdateSums, bool kGivenVhat = false,
          class K, class D>
HWY_INLINE void reduce_vector(D d, const HighwayOps<D>& o, const K& k, const TensorGlobals& gl,
                              const Buffers& b, size_t i, ReduceAccumulators<D>& acc,
                              hn::Vec<D> vhat) {
  const auto g = load_gradient<G>(d, o, k, b.grad, i);
  if constexpr (kGradSums) {
    const hn::RebindToSigned<D> di;
    acc.magnitude_bits = hn::Max(acc.magnitude_bits, hn::BitCast(di, hn::Abs(g)));
    if constexpr (kGradSq) acc.grad_sq.add(d, g);
  }
  if constexpr (kUpdateSums) {
    const auto e = element_moments<kGivenVhat>(d, o, k, gl, b, i, g, vhat);
    acc.agree += hn::CountTrue(d, hn::Gt(hn::Mul(e.u, g), hn::Zero(d)));
    acc.update_sq.add(d, core::unscaled_step(o, k, e.u, g));
    if (core::update_sums_need_weights(k)) {
      acc.weight_sq.add(d, b.master ? hn::LoadU(d, b.master + i) : load_f32<P>(d, b.param, i));
    }
  }
}

// The failing path of the finite check: how many of [begin, end) are NaN/Inf.
template <int G, class K, class D>
uint64_t count_nonfinite(D d, const HighwayOps<D>& o, const K& k, const Buffers& b, size_t begin,
                         size_t end) {
  uint64_t count = 0;
  const size_t lanes = hn::Lanes(d);
  size_t i = begin;
  for (; i + lanes <= end; i += lanes) {
    count += hn::CountTrue(d, hn::Not(hn::IsFinite(load_gradient<G>(d, o, k, b.grad, i))));
  }
  for (; i < end; ++i) {
    const float g = core::scaled_gradient(core::ScalarOps(), k, core::load_as_f32<G>(b.grad, i));
    count += std::isfinite(g) ? 0 : 1;
  }
  return count;
}

template <int P, int G, bool kGradSums, bool kGradSq, bool kUpdateSums, class K = StepConstants>
LUMINAV_SIMD_FLATTEN void reduce_typed(const K& k_in, const TensorGlobals& gl_in,
                                       const luminav_tensor& t, size_t begin, size_t end,
                                       luminav_partials& out) {
  const K k = k_in;
  const TensorGlobals gl = gl_in;
  using D = hn::ScalableTag<float>;
  const D d;
  const HighwayOps<D> o{d};
  const Buffers b = buffers_of(t, k);
  ReduceAccumulators<D> acc(d);
  const size_t lanes = hn::Lanes(d);
  Buffers fetch = b;
  if constexpr (kUpdateSums) fetch = update_sum_streams(b, k);
  // Only a pass 1 that computes prefetches (Note [software prefetch]).
  const size_t i = for_each_vector<P, G, kGradSq || kUpdateSums, kUpdateSums>(
      fetch, begin, end, lanes,
      [&](size_t at) {
        reduce_vector<P, G, kGradSums, kGradSq, kUpdateSums>(d, o, k, gl, b, at, acc, hn::Zero(d));
      });
  if (i < end) {
    TailStage<P, G> tail;
    const Buffers staged = tail.copy_in(b, i, end - i);
    reduce_vector<P, G, kGradSums, kGradSq, kUpdateSums>(d, o, k, gl, staged, 0, acc, hn::Zero(d));
  }
  out = luminav_partials{};
  if constexpr (kGradSums) {
    const hn::RebindToSigned<D> di;
    if (hn::GetLane(hn::MaxOfLanes(di, acc.magnitude_bits)) >= kInfinityBits) {
      out.nonfinite_count = count_nonfinite<G>(d, o, k, b, begin, end);
    }
    if constexpr (kGradSq) out.grad_sq_sum = acc.grad_sq.total();
  }
  if constexpr (kUpdateSums) {
    out.agree_count = acc.agree;
    out.update_sq_sum = acc.update_sq.total();
    out.weight_sq_sum = acc.weight_sq.total();
  }
}

// The update sums (K, sum (lr*u*phi)^2, sum x^2) of a kRow/kFactored tensor
// over [begin, end), in row segments (Note [row segments]).
template <int P, int G, bool kFactored>
LUMINAV_SIMD_FLATTEN void reduce_factored_typed(const StepConstants& k_in, const TensorGlobals& gl_in,
                                                const luminav_tensor& t, const FactorView& f,
                                                size_t begin, size_t end, luminav_partials& out) {
  const StepConstants k = k_in;
  const TensorGlobals gl = gl_in;
  using D = hn::ScalableTag<float>;
  const D d;
  const HighwayOps<D> o{d};
  const Buffers b{t.param, t.grad, t.exp_avg, nullptr, t.master};
  const Buffers fetch = update_sum_streams(b, k);
  ReduceAccumulators<D> acc(d);
  for_each_row_segment<kFactored>(
      d, o, f, begin, end,
      [&](size_t at, hn::Vec<D> vhat) {
        if (at + kPrefetchAhead < end) prefetch_streams<P, G, true>(fetch, at + kPrefetchAhead);
        reduce_vector<P, G, false, false, true, true>(d, o, k, gl, b, at, acc, vhat);
      },
      [&](size_t at, size_t count, hn::Vec<D> vhat) {
        TailStage<P, G> tail;
        const Buffers staged = tail.copy_in(b, at, count);
        reduce_vector<P, G, false, false, true, true>(d, o, k, gl, staged, 0, acc, vhat);
      });
  out = luminav_partials{};
  out.agree_count = acc.agree;
  out.update_sq_sum = acc.update_sq.total();
  out.weight_sq_sum = acc.weight_sq.total();
}

// The squares of g's lanes in double (exact: an fp32 square has 48 bits), as
// the two halves a double vector holds (one on a 1-lane target).
template <class D>
struct WideSquares {
  hn::Vec<WideD<D>> lo, hi;
};

template <class D>
HWY_INLINE WideSquares<D> wide_squares(D d, hn::Vec<D> g) {
  const WideD<D> dw;
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  const auto w = hn::PromoteTo(dw, g);
  return {hn::Mul(w, w), hn::Zero(dw)};
#else
  const hn::Half<D> dh;
  const auto wl = hn::PromoteTo(dw, hn::LowerHalf(dh, g));
  const auto wh = hn::PromoteTo(dw, hn::UpperHalf(dh, g));
  return {hn::Mul(wl, wl), hn::Mul(wh, wh)};
#endif
}

// col[0 .. lanes) += the squares, in double.
template <class D>
HWY_INLINE void add_to_columns(const WideSquares<D>& sq, double* col) {
  const WideD<D> dw;
  hn::StoreU(hn::Add(hn::LoadU(dw, col), sq.lo), dw, col);
#if HWY_TARGET != HWY_SCALAR
  const size_t half = hn::Lanes(dw);
  hn::StoreU(hn::Add(hn::LoadU(dw, col + half), sq.hi), dw, col + half);
#endif
}

template <int G>
LUMINAV_SIMD_FLATTEN int32_t factor_block_typed(const StepConstants& k_in, const luminav_tensor& t,
                                                uint64_t cols, size_t row_begin, size_t row_end,
                                                size_t col_begin, size_t col_end, double* row_sums,
                                                double* col_sums) {
  const StepConstants k = k_in;
  using D = hn::ScalableTag<float>;
  const D d;
  const hn::RebindToSigned<D> di;
  const WideD<D> dw;
  const HighwayOps<D> o{d};
  const size_t lanes = hn::Lanes(d);
  const size_t width = col_end - col_begin;
  const auto* grad = static_cast<const Stored<G>*>(t.grad);
  if (col_sums) std::fill(col_sums, col_sums + width, 0.0);
  auto magnitude = hn::Zero(di);
  int32_t tail_magnitude = 0;
  // Note [software prefetch]: a whole-row block is one stream (prefetched
  // kPrefetchAhead elements on); a striped one reads the same columns of the
  // next row next.
  const bool whole_rows = width == cols;
  const size_t block_end = row_end * cols;
  for (size_t r = row_begin; r < row_end; ++r) {
    const size_t base = r * cols + col_begin;
    const size_t ahead = whole_rows ? kPrefetchAhead : cols;
    // Lane-wise sums of squares then a fixed tree, as SquareSum (an exact
    // product added equals the fused multiply-add).
    auto row_lo = hn::Zero(dw), row_hi = hn::Zero(dw);
    size_t c = 0;
    for (; c + lanes <= width; c += lanes) {
      if (base + c + ahead < block_end) hwy::Prefetch(grad + base + c + ahead);
      const auto g = load_gradient<G>(d, o, k, t.grad, base + c);
      magnitude = hn::Max(magnitude, hn::BitCast(di, hn::Abs(g)));
      const WideSquares<D> sq = wide_squares(d, g);
      row_lo = hn::Add(row_lo, sq.lo);
      row_hi = hn::Add(row_hi, sq.hi);
      if (col_sums) add_to_columns(sq, col_sums + c);
    }
    double sum = hn::GetLane(hn::SumOfLanes(dw, hn::Add(row_lo, row_hi)));
    for (; c < width; ++c) {
      const float g = core::scaled_gradient(core::ScalarOps(), k, core::load_as_f32<G>(t.grad, base + c));
      tail_magnitude = std::max(tail_magnitude, static_cast<int32_t>(core::float_bits(std::fabs(g))));
      const double g2 = static_cast<double>(g) * static_cast<double>(g);
      sum += g2;
      if (col_sums) col_sums[c] += g2;
    }
    row_sums[r - row_begin] = sum;
  }
  return std::max(tail_magnitude, static_cast<int32_t>(hn::GetLane(hn::MaxOfLanes(di, magnitude))));
}

void ApplyRange(const StepConstants& k, const TensorGlobals& gl, const luminav_tensor& t,
                const FactorView* f, size_t begin, size_t end) {
  const core::MomentLayout layout = core::moment_layout(k.tdclm, t);
  const StepConstants e = core::element_constants(k, layout);
  core::with_dtypes(t, [&]<int P, int G>() {
    core::with_step_variant(e, [&](const auto& kv) {
      if (layout.kind == core::SecondMoment::kFactored) {
        apply_factored_typed<P, G, true>(kv, gl, t, *f, begin, end);
      } else if (layout.kind == core::SecondMoment::kRow) {
        apply_factored_typed<P, G, false>(kv, gl, t, *f, begin, end);
      } else {
        apply_typed<P, G>(kv, gl, t, begin, end);
      }
    });
  });
}

void ReduceRange(const StepConstants& k, const TensorGlobals& gl, const luminav_tensor& t,
                 int round, const FactorView* f, size_t begin, size_t end, luminav_partials* out) {
  // The rounds follow the step's constants, the element math the layout's.
  const bool grad_sums = core::round_has_grad_sums(round);
  const bool grad_sq = grad_sums && k.grad_sq_wanted;
  const bool update_sums = core::round_has_update_sums(k, round);
  const core::MomentLayout layout = core::moment_layout(k.tdclm, t);
  const StepConstants e = core::element_constants(k, layout);
  core::with_dtypes(t, [&]<int P, int G>() {
    if (core::has_row_factor(layout) && update_sums) {
      // Their round 0 is reduce_factor_block; the update sums have a round of their own.
      if (layout.kind == core::SecondMoment::kFactored) {
        reduce_factored_typed<P, G, true>(e, gl, t, *f, begin, end, *out);
      } else {
        reduce_factored_typed<P, G, false>(e, gl, t, *f, begin, end, *out);
      }
    } else if (grad_sq && update_sums) {
      reduce_typed<P, G, true, true, true>(e, gl, t, begin, end, *out);
    } else if (grad_sums && update_sums) {
      reduce_typed<P, G, true, false, true>(e, gl, t, begin, end, *out);
    } else if (grad_sq) {
      reduce_typed<P, G, true, true, false>(e, gl, t, begin, end, *out);
    } else if (grad_sums && e.inv_grad_scale == 1.0f) {  // CLM's bare finite check
      reduce_typed<P, G, true, false, false>(core::UnscaledStep(e), gl, t, begin, end, *out);
    } else if (grad_sums) {
      reduce_typed<P, G, true, false, false>(e, gl, t, begin, end, *out);
    } else if (update_sums) {
      reduce_typed<P, G, false, false, true>(e, gl, t, begin, end, *out);
    } else {
      *out = luminav_partials{};
    }
  });
}

int32_t ReduceFactorBlock(const StepConstants& k, const luminav_tensor& t, uint64_t cols,
                          size_t row_begin, size_t row_end, size_t col_begin, size_t col_end,
                          double* row_sums, double* col_sums) {
  // Only the gradient is read: one instance per gradient dtype.
  switch (t.grad_dtype) {
    case LUMINAV_DTYPE_F32:
      return factor_block_typed<LUMINAV_DTYPE_F32>(k, t, cols, row_begin, row_end, col_begin,
                                                   col_end, row_sums, col_sums);
    case LUMINAV_DTYPE_BF16:
      return factor_block_typed<LUMINAV_DTYPE_BF16>(k, t, cols, row_begin, row_end, col_begin,
                                                    col_end, row_sums, col_sums);
    default:
      return factor_block_typed<LUMINAV_DTYPE_F16>(k, t, cols, row_begin, row_end, col_begin,
                                                   col_end, row_sums, col_sums);
  }
}

int64_t DispatchedTarget() { return HWY_TARGET; }

}  // namespace luminav::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminav::simd {

HWY_EXPORT(ApplyRange);
HWY_EXPORT(ReduceRange);
HWY_EXPORT(ReduceFactorBlock);
HWY_EXPORT(DispatchedTarget);

void apply_range(const core::StepConstants& k, const core::TensorGlobals& globals,
                 const luminav_tensor& tensor, const FactorView* factors, size_t begin,
                 size_t end) {
  HWY_DYNAMIC_DISPATCH(ApplyRange)(k, globals, tensor, factors, begin, end);
}

void reduce_range(const core::StepConstants& k, const core::TensorGlobals& globals,
                  const luminav_tensor& tensor, int round, const FactorView* factors,
                  size_t begin, size_t end, luminav_partials& out) {
  HWY_DYNAMIC_DISPATCH(ReduceRange)(k, globals, tensor, round, factors, begin, end, &out);
}

int32_t reduce_factor_block(const core::StepConstants& k, const luminav_tensor& tensor,
                            uint64_t cols, size_t row_begin, size_t row_end, size_t col_begin,
                            size_t col_end, double* row_sums, double* col_sums) {
  return HWY_DYNAMIC_DISPATCH(ReduceFactorBlock)(k, tensor, cols, row_begin, row_end, col_begin,
                                                 col_end, row_sums, col_sums);
}

int64_t dispatched_target() { return HWY_DYNAMIC_DISPATCH(DispatchedTarget)(); }

}  // namespace luminav::simd
#endif  // HWY_ONCE
