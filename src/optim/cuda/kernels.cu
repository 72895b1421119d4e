// LuminaV's CUDA kernels (compiled ahead of time to cubins and PTX): pass-1
// reductions and the pass-2 update, over many tensors per launch.
#include <cstdint>

#include "optim/core/element_io.h"
#include "optim/core/exchange_record.h"
#include "optim/core/half_convert.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/stochastic_hash.h"
#include "optim/core/update_math.h"
#include "optim/cuda/launch_params.h"

namespace luminav::cuda {
namespace {

using core::ScalarOps;
using core::StepConstants;
using core::TensorGlobals;

// ---- element types ---------------------------------------------------------

// Note [access pattern]: a thread works on two groups of 4 consecutive
// elements, kBlockSize groups apart, so that every load and store instruction
// of a warp covers one contiguous span (512 bytes of fp32: 16-byte accesses;
// 256 bytes of bf16/fp16: 8-byte accesses). The first version gave each
// thread 8 consecutive elements (16-byte accesses for 16-bit data too), but
// its fp32 accesses then touched every sector twice, half each time, and
// Nsight Compute showed the L2 at 95% busy with DRAM at 63% on the H200.
// Single elements (tails, unaligned tensors) load through core/element_io.h.
// Note [scalar store]: they are written through Elem<P>::store1, the vector
// path's own rounding code: with core::store_param inlined into that loop,
// sm_90 code built by nvcc 13.0 drew the stochastic rounding bits of element
// i + 1 for element i (seen on an H200, tests/optim/test_gpu_cuda.py, unaligned and
// tail elements), although the PTX computed index_offset + i; the cause (in
// ptxas or in our reading of it) was not established.
// Build-time tuning knobs of the update kernels, chosen from side-by-side
// runs on an H200 (docs/benchmarks-history.md): LUMINAV_CUDA_MIN_BLOCKS, the blocks
// per SM the register budget must allow (4: at most 64 registers; without the
// cap the 16-bit kernels took 80-100 and ran at 2 blocks per SM, 66% of the
// copy bandwidth instead of 85%), and LUMINAV_CUDA_STREAMING, evict-first
// loads and stores (every byte is used once).
#ifndef LUMINAV_CUDA_MIN_BLOCKS
#define LUMINAV_CUDA_MIN_BLOCKS 4
#endif
#ifndef LUMINAV_CUDA_STREAMING
#define LUMINAV_CUDA_STREAMING 1
#endif

template <class T>
__device__ __forceinline__ T load_once(const T* p) {
#if LUMINAV_CUDA_STREAMING
  return __ldcs(p);
#else
  return *p;
#endif
}

template <class T>
__device__ __forceinline__ void store_once(T* p, T value) {
#if LUMINAV_CUDA_STREAMING
  __stcs(p, value);
#else
  *p = value;
#endif
}

template <int D>
struct Elem;

template <>
struct Elem<LUMINAV_DTYPE_F32> {
  static __device__ __forceinline__ void load4(const void* base, uint64_t i, float* out) {
    const float4 a = load_once(reinterpret_cast<const float4*>(static_cast<const float*>(base) + i));
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
  }
  static __device__ __forceinline__ void store4(void* base, uint64_t i, const float* x, const StepConstants&,
                                                uint64_t, uint64_t) {
    store_once(reinterpret_cast<float4*>(static_cast<float*>(base) + i), make_float4(x[0], x[1], x[2], x[3]));
  }
  static __device__ __forceinline__ void store1(void* base, uint64_t i, float x, const StepConstants&, uint64_t,
                                                uint64_t) {
    static_cast<float*>(base)[i] = x;
  }
};

// 16-bit parameters/gradients: conversions and rounding from core (spec
// "Stochastic rounding" / "Conversions"), bit for bit as on the host.
template <bool kBf16>
struct Elem16 {
  static __device__ __forceinline__ float to_f32(uint16_t h) {
    return kBf16 ? core::bf16_to_f32(h) : core::f16_to_f32(h);
  }
  static __device__ __forceinline__ uint32_t from_f32(float x, const StepConstants& k, uint64_t seed,
                                                      uint64_t index) {
    if (k.stochastic_rounding) {
      const uint32_t r = core::rounding_bits(seed, k.step, index);
      return kBf16 ? core::f32_to_bf16_stochastic(x, r) : core::f32_to_f16_stochastic(x, r);
    }
    return kBf16 ? core::f32_to_bf16_rne(x) : core::f32_to_f16_rne(x);
  }
  static __device__ __forceinline__ void load4(const void* base, uint64_t i, float* out) {
    const uint2 w = load_once(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + i));
    out[0] = to_f32(static_cast<uint16_t>(w.x & 0xffffu));
    out[1] = to_f32(static_cast<uint16_t>(w.x >> 16));
    out[2] = to_f32(static_cast<uint16_t>(w.y & 0xffffu));
    out[3] = to_f32(static_cast<uint16_t>(w.y >> 16));
  }
  static __device__ __forceinline__ void store4(void* base, uint64_t i, const float* x, const StepConstants& k,
                                                uint64_t seed, uint64_t index0) {
    const uint32_t lo = from_f32(x[0], k, seed, index0) | (from_f32(x[1], k, seed, index0 + 1) << 16);
    const uint32_t hi = from_f32(x[2], k, seed, index0 + 2) | (from_f32(x[3], k, seed, index0 + 3) << 16);
    store_once(reinterpret_cast<uint2*>(static_cast<uint16_t*>(base) + i), make_uint2(lo, hi));
  }
  static __device__ __forceinline__ void store1(void* base, uint64_t i, float x, const StepConstants& k,
                                                uint64_t seed, uint64_t index) {
    static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(from_f32(x, k, seed, index));
  }
};
template <>
struct Elem<LUMINAV_DTYPE_BF16> : Elem16<true> {};
template <>
struct Elem<LUMINAV_DTYPE_F16> : Elem16<false> {};

// The two groups of a thread: elements i0..i0+3 and (when `two`) i1..i1+3,
// as out[0..3] and out[4..7]. All loads are issued before any use.
template <int D>
__device__ __forceinline__ void load_groups(const void* base, uint64_t i0, uint64_t i1, bool two, float (&out)[8]) {
  Elem<D>::load4(base, i0, out);
  if (two) Elem<D>::load4(base, i1, out + 4);
}

template <int D>
__device__ __forceinline__ void store_groups(void* base, uint64_t i0, uint64_t i1, bool two, const float (&x)[8],
                                             const StepConstants& k, uint64_t seed, uint64_t index_offset) {
  Elem<D>::store4(base, i0, x, k, seed, index_offset + i0);
  if (two) Elem<D>::store4(base, i1, x + 4, k, seed, index_offset + i1);
}

// ---- the tile a block works on ----------------------------------------------

struct Tile {
  const TensorSlot* slot;
  uint32_t slot_index;
  uint64_t tile;   // index of the tile inside its tensor
  uint64_t begin;  // element range [begin, end) of the tensor
  uint64_t end;
};

// The slot of block b: the largest j < count with first[j] <= b (first is
// the prefix sum of the slots' block counts).
__device__ __forceinline__ uint32_t slot_of_block(const uint32_t* first, uint32_t count, uint32_t b) {
  uint32_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (first[mid] <= b) lo = mid;
    else hi = mid;
  }
  return lo;
}

__device__ __forceinline__ Tile block_tile(const LaunchParams& lp) {
  const uint32_t b = blockIdx.x;
  const uint32_t lo = slot_of_block(lp.first_tile, lp.num_slots, b);
  Tile t;
  t.slot = &lp.slots[lo];
  t.slot_index = lo;
  t.tile = b - lp.first_tile[lo];
  t.begin = t.tile * lp.tile_elems;
  const uint64_t end = t.begin + lp.tile_elems;
  t.end = end < t.slot->num_elements ? end : t.slot->num_elements;
  return t;
}

// The globals of a slot: finalized on the device (asynchronous step) or
// passed by the host in the slot.
__device__ __forceinline__ TensorGlobals globals_of(const LaunchParams& lp, uint32_t slot_index) {
  if (lp.globals != nullptr) return lp.globals[lp.globals_base + slot_index];
  const TensorSlot& s = lp.slots[slot_index];
  TensorGlobals g;
  g.second_moment = s.second_moment;
  g.cautious_scale = s.cautious_scale;
  g.bound_scale = s.bound_scale;
  return g;
}

// The step constants of a launch: by value, or (asynchronous step) the
// group's constants formed on the device, read once per block.
__device__ __forceinline__ const StepConstants& step_constants(const LaunchParams& lp) {
  __shared__ StepConstants device_k;
  if (lp.k_device == nullptr) return lp.k;
  if (threadIdx.x == 0) device_k = *lp.k_device;
  __syncthreads();
  return device_k;
}

// Asynchronous step: true when this step must write nothing (a failed
// check, GradScaler's found_inf, an earlier failure not cleared). The words
// are final before pass 2 starts (stream order).
__device__ __forceinline__ bool step_blocked(const LaunchParams& lp) {
  if (lp.words == nullptr) return false;
  const volatile dispatch::AsyncStepWords* w = lp.words;
  return w->blocked != 0 || w->first_bad != dispatch::kNoBadTensor;
}

// Gradients are read as g * (1/sigma) (spec "Gradient scale").
__device__ __forceinline__ float unscaled(const StepConstants& k, float g) {
  return k.inv_grad_scale == 1.0f ? g : g * k.inv_grad_scale;
}

__device__ __forceinline__ bool is_finite_bits(float g) {
  return (core::float_bits(g) & 0x7f800000u) != 0x7f800000u;
}

// ---- pass 2: the update -----------------------------------------------------

// One element's step through core's math (Note [one math, many traversals]).
// In TD-CLM `v` holds the element's second moment as loaded (s, or vhat_i of
// the row/factored forms) and is not written back.
__device__ __forceinline__ void update_element(const StepConstants& k, const TensorGlobals& gl, float g,
                                               float& m, float& v, float& x) {
  const ScalarOps o;
  const auto e = k.tdclm ? core::tdclm_moments_and_update(o, k, m, v, g)
                         : core::clm_moments_and_update(o, k, m, v, g);
  m = e.m;
  v = e.v;
  x = core::apply_update(o, k, gl, x, e.u, g);
}

// Row and column of element i: a multiply and shifts where both fit in 32
// bits (Note [division by an invariant divisor]; the 64-bit division is a
// long subroutine on the GPU).
__device__ __forceinline__ void row_and_column(const cuda::FactorView& f, uint64_t i, uint64_t* r, uint64_t* c) {
  if (((i | f.cols) >> 32) == 0) {
    const uint32_t q = core::divide(f.by_cols, static_cast<uint32_t>(i));
    *r = q;
    *c = static_cast<uint32_t>(i) - q * static_cast<uint32_t>(f.cols);
  } else {
    *r = i / f.cols;
    *c = i - *r * f.cols;
  }
}

// vhat of a TD-CLM row/factored element at row r, column c (Note [factors on the device]).
__device__ __forceinline__ float factor_vhat(const cuda::FactorView& f, uint64_t r, uint64_t c) {
  if (f.col_over_rho == nullptr) return f.row[r];
  return core::factored_vhat(ScalarOps{}, f.row[r], f.col_over_rho[c]);
}

// The TD-CLM second moment of element i: the tensor's s, or vhat_i.
__device__ __forceinline__ float tdclm_second(const TensorGlobals& gl, const cuda::FactorView* f, uint64_t i) {
  if (f == nullptr) return gl.second_moment;
  uint64_t r, c;
  row_and_column(*f, i, &r, &c);
  return factor_vhat(*f, r, c);
}

// The same for the four elements i..i+3, i a multiple of 4 (Note [access
// pattern]).
// Note [groups inside one row]: where C is a multiple of 4 (every matrix of a
// transformer) the four lie in one row from a column that is a multiple of 4:
// one load of the row factor and one 16-byte load of col/rho (its array is
// 16-byte aligned: FactorArrays) instead of four gathers of each. vhat is the
// same product of the same operands: the same bits either way.
__device__ __forceinline__ void tdclm_second4(const TensorGlobals& gl, const cuda::FactorView* f, uint64_t i,
                                              float* v) {
  if (f == nullptr) {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = gl.second_moment;
    return;
  }
  uint64_t r, c;
  row_and_column(*f, i, &r, &c);
  if ((f->cols & 3) == 0) {
    const float row = f->row[r];
    if (f->col_over_rho == nullptr) {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = row;
    } else {
      const float4 q = *reinterpret_cast<const float4*>(f->col_over_rho + c);
      const float col_over_rho[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = core::factored_vhat(ScalarOps{}, row, col_over_rho[e]);
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    v[e] = factor_vhat(*f, r, c);
    if (++c == f->cols) {
      c = 0;
      ++r;
    }
  }
}

// The state both passes read for an element group pair: m, v (CLM's v_i, or
// TD-CLM's second moment) and the working weight x (the master when given,
// else the parameter).
template <int P>
__device__ __forceinline__ void load_state(const StepConstants& k, const TensorGlobals& gl,
                                           const cuda::FactorView* f, const TensorSlot& s, uint64_t i0,
                                           uint64_t i1, bool two, float (&m)[8], float (&v)[8], float (&x)[8],
                                           bool read_x = true) {
  constexpr int F32 = LUMINAV_DTYPE_F32;
  load_groups<F32>(s.exp_avg, i0, i1, two, m);
  if (!k.tdclm) {
    load_groups<F32>(s.exp_avg_sq, i0, i1, two, v);
  } else {
    tdclm_second4(gl, f, i0, v);
    if (two) tdclm_second4(gl, f, i1, v + 4);
    else v[4] = v[5] = v[6] = v[7] = v[0];  // not stored (a finite stand-in)
  }
  if (!read_x) return;
  if (s.master != nullptr) load_groups<F32>(s.master, i0, i1, two, x);
  else load_groups<P>(s.param, i0, i1, two, x);
}

// The same for one element.
template <int P>
__device__ __forceinline__ void load_state1(const StepConstants& k, const TensorGlobals& gl,
                                            const cuda::FactorView* f, const TensorSlot& s, uint64_t i, float& m,
                                            float& v, float& x, bool read_x = true) {
  m = s.exp_avg[i];
  v = k.tdclm ? tdclm_second(gl, f, i) : s.exp_avg_sq[i];
  if (read_x) x = s.master != nullptr ? s.master[i] : core::load_as_f32<P>(s.param, i);
}

template <int P, int G>
__device__ __forceinline__ void apply_vector(const StepConstants& k, const TensorGlobals& gl,
                                             const cuda::FactorView* f, const TensorSlot& s, uint64_t i0,
                                             uint64_t i1, bool two) {
  constexpr int F32 = LUMINAV_DTYPE_F32;
  float g[8], m[8], v[8], x[8];
  load_groups<G>(s.grad, i0, i1, two, g);
  load_state<P>(k, gl, f, s, i0, i1, two, m, v, x);
#pragma unroll
  for (int e = 0; e < 8; ++e) update_element(k, gl, unscaled(k, g[e]), m[e], v[e], x[e]);
  store_groups<F32>(s.exp_avg, i0, i1, two, m, k, 0, 0);
  if (!k.tdclm) store_groups<F32>(s.exp_avg_sq, i0, i1, two, v, k, 0, 0);
  if (s.master != nullptr) store_groups<F32>(s.master, i0, i1, two, x, k, 0, 0);
  store_groups<P>(s.param, i0, i1, two, x, k, s.seed, s.index_offset);
}

template <int P, int G>
__device__ __forceinline__ void apply_scalar(const StepConstants& k, const TensorGlobals& gl,
                                             const cuda::FactorView* f, const TensorSlot& s, uint64_t i) {
  const float g = unscaled(k, core::load_as_f32<G>(s.grad, i));
  float m, v, x;
  load_state1<P>(k, gl, f, s, i, m, v, x);
  update_element(k, gl, g, m, v, x);
  s.exp_avg[i] = m;
  if (!k.tdclm) s.exp_avg_sq[i] = v;
  if (s.master != nullptr) s.master[i] = x;
  // The same rounding code as the vector path (Note [scalar store]).
  Elem<P>::store1(s.param, i, x, k, s.seed, s.index_offset + i);
}

// Runs the tile (Note [access pattern]): vec(i0, i1, two) over pairs of
// 4-element groups where the tensor's buffers are 16-byte aligned, one(i) over
// single elements elsewhere (the tail, unaligned tensors).
template <class Vec, class One>
__device__ __forceinline__ void for_tile(const Tile& t, Vec vec, One one) {
  uint64_t scalar_begin = t.begin;
  if (t.slot->vector_ok) {
    const uint64_t groups = (t.end - t.begin) / 4;
    for (uint64_t g = threadIdx.x; g < groups; g += 2 * kBlockSize) {
      vec(t.begin + 4 * g, t.begin + 4 * (g + kBlockSize), g + kBlockSize < groups);
    }
    scalar_begin = t.begin + 4 * groups;
  }
  for (uint64_t i = scalar_begin + threadIdx.x; i < t.end; i += kBlockSize) one(i);
}

// The element math of a slot (asynchronous step): a per-element TD-CLM
// second moment (C = 1) runs CLM's code (Note [second moment layouts] in
// core/second_moment_layout.h); row/factored tensors read their new factors
// (Note [factors on the device]). Uniform per block.
struct SlotMath {
  const StepConstants* k;
  const cuda::FactorView* factors;
};

__device__ __forceinline__ SlotMath slot_math(const LaunchParams& lp, const Tile& t) {
  const StepConstants& step_k = step_constants(lp);
  __shared__ StepConstants element_k;
  const auto kind = static_cast<core::SecondMoment>(t.slot->moment_kind);
  SlotMath m{&step_k, nullptr};
  if (!step_k.tdclm || lp.factor_views == nullptr) return m;
  if (kind == core::SecondMoment::kElementwise) {
    if (threadIdx.x == 0) {
      element_k = step_k;
      element_k.tdclm = 0;
    }
    __syncthreads();
    m.k = &element_k;
  } else if (kind == core::SecondMoment::kRow || kind == core::SecondMoment::kFactored) {
    m.factors = &lp.factor_views[lp.globals_base + t.slot_index];
  }
  return m;
}

template <int P, int G>
__device__ __forceinline__ void apply_tile(const LaunchParams& lp) {
  if (step_blocked(lp)) return;
  const Tile t = block_tile(lp);
  const TensorSlot& s = *t.slot;
  const TensorGlobals gl = globals_of(lp, t.slot_index);
  const SlotMath sm = slot_math(lp, t);
  const StepConstants& k = *sm.k;
  const cuda::FactorView* f = sm.factors;
  if (k.tdclm && t.tile == 0) {
    // TD-CLM keeps its second moment in the exp_avg_sq slot: s (formed by
    // the host or the device's finalize), or the new factors.
    if (f == nullptr) {
      if (threadIdx.x == 0) s.exp_avg_sq[0] = gl.second_moment;
    } else {
      for (uint64_t r = threadIdx.x; r < f->rows; r += kBlockSize) s.exp_avg_sq[r] = f->row[r];
      if (f->col != nullptr) {
        for (uint64_t c = threadIdx.x; c < f->cols; c += kBlockSize) s.exp_avg_sq[f->rows + c] = f->col[c];
      }
    }
  }
  for_tile(
      t, [&](uint64_t i0, uint64_t i1, bool two) { apply_vector<P, G>(k, gl, f, s, i0, i1, two); },
      [&](uint64_t i) { apply_scalar<P, G>(k, gl, f, s, i); });
}

// ---- pass 1: reductions -----------------------------------------------------

// Note [deterministic reductions]: each thread sums its own elements of the
// tile in index order, the warp combines lanes with a fixed shuffle tree, and
// thread 0 adds the warps in order; the tile's partial goes to scratch. The
// combine kernel then adds a tensor's tiles with a fixed stride pattern and
// the same trees. Nothing depends on timing (no atomics), so the bits repeat.
struct Accum {
  uint64_t nonfinite = 0;
  uint64_t agree = 0;
  double grad_sq = 0.0;
  double update_sq = 0.0;
  double weight_sq = 0.0;

  __device__ __forceinline__ void add(const Accum& o) {
    nonfinite += o.nonfinite;
    agree += o.agree;
    grad_sq += o.grad_sq;
    update_sq += o.update_sq;
    weight_sq += o.weight_sq;
  }
  __device__ __forceinline__ void add(const luminav_partials& o) {
    nonfinite += o.nonfinite_count;
    agree += o.agree_count;
    grad_sq += o.grad_sq_sum;
    update_sq += o.update_sq_sum;
    weight_sq += o.weight_sq_sum;
  }
  __device__ __forceinline__ void store(luminav_partials* out) const {
    out->nonfinite_count = nonfinite;
    out->agree_count = agree;
    out->grad_sq_sum = grad_sq;
    out->update_sq_sum = update_sq;
    out->weight_sq_sum = weight_sq;
  }
};

__device__ __forceinline__ Accum warp_sum(Accum a) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    Accum o;
    o.nonfinite = __shfl_down_sync(0xffffffffu, a.nonfinite, offset);
    o.agree = __shfl_down_sync(0xffffffffu, a.agree, offset);
    o.grad_sq = __shfl_down_sync(0xffffffffu, a.grad_sq, offset);
    o.update_sq = __shfl_down_sync(0xffffffffu, a.update_sq, offset);
    o.weight_sq = __shfl_down_sync(0xffffffffu, a.weight_sq, offset);
    a.add(o);
  }
  return a;
}

// Block-wide sum; the result is valid in thread 0.
__device__ __forceinline__ Accum block_sum(Accum a) {
  __shared__ Accum warps[kBlockSize / 32];
  a = warp_sum(a);
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x / 32] = a;
  __syncthreads();
  Accum total;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kBlockSize / 32; ++w) total.add(warps[w]);
  }
  return total;
}

// Pass-1 contribution of one element. With kReduceUpdate it recomputes u as
// pass 2 will (from the old state, the new moments are not stored; in TD-CLM
// `v` is the element's second moment, as in update_element).
__device__ __forceinline__ void reduce_element(const StepConstants& k, const TensorGlobals& gl,
                                               uint32_t fields, float g, float m, float v, float x,
                                               Accum& a) {
  g = unscaled(k, g);
  if (fields & kReduceGrad) {
    a.nonfinite += is_finite_bits(g) ? 0u : 1u;
    a.grad_sq += static_cast<double>(g) * static_cast<double>(g);
  }
  if (fields & kReduceUpdate) {
    const ScalarOps o;
    const auto e = k.tdclm ? core::tdclm_moments_and_update(o, k, m, v, g)
                           : core::clm_moments_and_update(o, k, m, v, g);
    a.agree += (e.u * g > 0.0f) ? 1u : 0u;
    const double d = core::unscaled_step(o, k, e.u, g);
    a.update_sq += d * d;
    a.weight_sq += static_cast<double>(x) * static_cast<double>(x);
  }
}

// The block's sum goes to its tile's slot of the scratch buffer.
__device__ __forceinline__ void store_tile_partial(const LaunchParams& lp, const Accum& a) {
  const Accum total = block_sum(a);
  if (threadIdx.x == 0) {
    total.store(reinterpret_cast<luminav_partials*>(lp.tile_partials + uint64_t{blockIdx.x} * kTilePartialStride));
  }
}

// Asynchronous step (Note [device-resident step]): the slot's tile partials
// added in tile order (as luminav_combine_partials does, so the bits do not
// depend on which block comes last), folded into its globals on the device;
// a failed finite check marks the step (the smallest position wins, so the
// verdict does not depend on timing either). Run by the last block of the
// slot to finish its tile (Note [last block finalizes]).
__device__ void finalize_slot(const LaunchParams& lp, uint32_t j) {
  Accum a;
  for (uint32_t t = lp.first_tile[j] + threadIdx.x; t < lp.first_tile[j + 1]; t += kBlockSize) {
    const auto* p = reinterpret_cast<const luminav_partials*>(lp.tile_partials + uint64_t{t} * kTilePartialStride);
    luminav_partials v;
    v.nonfinite_count = __ldcg(&p->nonfinite_count);
    v.agree_count = __ldcg(&p->agree_count);
    v.grad_sq_sum = __ldcg(&p->grad_sq_sum);
    v.update_sq_sum = __ldcg(&p->update_sq_sum);
    v.weight_sq_sum = __ldcg(&p->weight_sq_sum);
    a.add(v);
  }
  const Accum total = block_sum(a);
  if (threadIdx.x != 0) return;
  const TensorSlot& s = lp.slots[j];
  const StepConstants& k = *lp.k_device;
  luminav_partials sum;
  total.store(&sum);
  lp.tensor_partials[j] = sum;
  const int round = static_cast<int>(lp.round);
  if (core::round_has_grad_sums(round) && k.check_finite && sum.nonfinite_count > 0) {
    atomicMin(&lp.words->first_bad, s.position);
  }
  TensorGlobals& g = lp.finalized[lp.globals_base + j];
  const float s_old = (k.tdclm && round == 0) ? s.exp_avg_sq[0] : 0.0f;
  core::fold_round_sums(k, sum, s.num_elements, round, s_old, g);
}

// Note [last block finalizes]: each block of an asynchronous reduction
// counts itself done on its slot's counter (after a fence that publishes its
// tile partial); the block that brings the count to the slot's tile count
// finalizes the slot and resets the counter for the next round. One launch
// instead of a reduction and a finalize launch per batch.
__device__ __forceinline__ void finish_tile(const LaunchParams& lp, const Tile& t) {
  if (lp.slot_counters == nullptr) return;
  __shared__ bool last;
  __syncthreads();  // the tile partial is written (thread 0 wrote it after the block sum)
  if (threadIdx.x == 0) {
    __threadfence();
    const uint32_t tiles = lp.first_tile[t.slot_index + 1] - lp.first_tile[t.slot_index];
    uint32_t* counter = &lp.slot_counters[lp.globals_base + t.slot_index];
    last = atomicAdd(counter, 1u) == tiles - 1;
    if (last) *counter = 0;
  }
  __syncthreads();
  if (last) {
    __threadfence();
    finalize_slot(lp, t.slot_index);
  }
}

template <int P, int G>
__device__ __forceinline__ void reduce_tile(const LaunchParams& lp) {
  if (lp.words != nullptr && lp.words->blocked) return;  // nothing will be applied
  const Tile t = block_tile(lp);
  const TensorSlot& s = *t.slot;
  const SlotMath sm = slot_math(lp, t);
  const StepConstants& k = *sm.k;
  const cuda::FactorView* f = sm.factors;
  const TensorGlobals gl = globals_of(lp, t.slot_index);
  const uint32_t fields = lp.reduce_fields;
  const bool need_state = (fields & kReduceUpdate) != 0;
  const bool read_x = (fields & kReduceWeights) != 0;  // else x stays 0 and sum x^2 is not used
  Accum a;
  const auto kind = static_cast<core::SecondMoment>(s.moment_kind);
  if ((fields & kReduceFactorGrads) && !need_state &&
      (kind == core::SecondMoment::kRow || kind == core::SecondMoment::kFactored)) {
    // luminav_factor_sums reads and checks this gradient (Note [factor tiles]);
    // the slot's finalize still runs (its globals reset for the round).
    store_tile_partial(lp, a);
    finish_tile(lp, t);
    return;
  }
  if (!need_state && s.vector_ok) {
    // The finite check and sum g^2 read the gradient alone: four groups in
    // flight per thread, or a warp keeps too few bytes in flight to reach the
    // copy bandwidth (bf16 gradients ran at 1.6 TB/s with two).
    constexpr uint32_t kStride = kBlockSize;
    const uint64_t groups = (t.end - t.begin) / 4;
    uint64_t grp = threadIdx.x;
    for (; grp + 3 * kStride < groups; grp += 4 * kStride) {
      float g[16];
#pragma unroll
      for (int q = 0; q < 4; ++q) Elem<G>::load4(s.grad, t.begin + 4 * (grp + q * kStride), g + 4 * q);
#pragma unroll
      for (int e = 0; e < 16; ++e) reduce_element(k, gl, fields, g[e], 0.0f, 0.0f, 0.0f, a);
    }
    for (; grp < groups; grp += kStride) {
      float g[4];
      Elem<G>::load4(s.grad, t.begin + 4 * grp, g);
#pragma unroll
      for (int e = 0; e < 4; ++e) reduce_element(k, gl, fields, g[e], 0.0f, 0.0f, 0.0f, a);
    }
    for (uint64_t i = t.begin + 4 * groups + threadIdx.x; i < t.end; i += kBlockSize) {
      reduce_element(k, gl, fields, core::load_as_f32<G>(s.grad, i), 0.0f, 0.0f, 0.0f, a);
    }
    store_tile_partial(lp, a);
    finish_tile(lp, t);
    return;
  }
  for_tile(
      t,
      [&](uint64_t i0, uint64_t i1, bool two) {
        float g[8], m[8] = {}, v[8] = {}, x[8] = {};
        load_groups<G>(s.grad, i0, i1, two, g);
        if (need_state) load_state<P>(k, gl, f, s, i0, i1, two, m, v, x, read_x);
        const int count = two ? 8 : 4;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (e < count) reduce_element(k, gl, fields, g[e], m[e], v[e], x[e], a);
        }
      },
      [&](uint64_t i) {
        const float g = core::load_as_f32<G>(s.grad, i);
        float m = 0.0f, v = 0.0f, x = 0.0f;
        if (need_state) load_state1<P>(k, gl, f, s, i, m, v, x, read_x);
        reduce_element(k, gl, fields, g, m, v, x, a);
      });
  store_tile_partial(lp, a);
  finish_tile(lp, t);
}

// ---- TD-CLM factors on the device (Note [factors on the device]) -----------

__device__ __forceinline__ const cuda::FactorSlot* factor_slot_of(const cuda::FactorParams& fp, uint32_t* local) {
  const uint32_t b = blockIdx.x;
  const uint32_t lo = slot_of_block(fp.first_block, fp.num_slots, b);
  *local = b - fp.first_block[lo];
  return &fp.slots[lo];
}

// Four consecutive elements of row r from column c (g unscaled; columns
// past the end read as 0, which adds nothing to a sum of squares).
template <int G>
__device__ __forceinline__ void load_row_group(const cuda::FactorSlot& f, const StepConstants& k, uint64_t r,
                                               uint64_t c, float* out) {
  const uint64_t at = r * f.cols + c;
  if (f.vector_ok && c + 4 <= f.cols) {
    Elem<G>::load4(f.grad, at, out);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = c + e < f.cols ? core::load_as_f32<G>(f.grad, at + e) : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = unscaled(k, out[e]);
}

// Note [factor tiles] (dispatch/async_workspace.h): block (chunk, strip)
// reads rows [128 chunk, +128) x columns [256 strip, +256) of the gradient
// once. Warp w takes the tile's rows w, w + 8, ...; lane l columns 4l..4l+3
// and 128 + 4l..+3 of the strip (two 16-byte loads per row for fp32, each
// warp-wide load one contiguous 512 bytes). A row's partial: the lane's
// eight squares in a fixed tree, then the warp's shuffle tree; a column's:
// its lane adds its warp's rows in order, then the eight warps are added in
// order through shared memory. Nothing depends on timing or on the grid.
// In the unsharded step the block also does these tensors' finite check
// (the smallest position wins, as in finalize_slot).
inline constexpr int kFactorWarps = kBlockSize / 32;
inline constexpr int kFactorRowsPerWarp = static_cast<int>(dispatch::kFactorChunkRows) / kFactorWarps;
static_assert(dispatch::kFactorTileCols == 2 * 4 * 32, "a lane covers two groups of 4 columns");
static_assert(dispatch::kFactorTileCols == kBlockSize, "the column combine takes a thread per column");

template <int G>
__device__ __forceinline__ void factor_sums(const cuda::FactorParams& fp) {
  if (fp.words->blocked) return;  // uniform: nothing will be applied
  uint32_t local = 0;
  const cuda::FactorSlot& f = *factor_slot_of(fp, &local);
  const StepConstants k = *fp.k_device;  // a copy: read once, not after every store
  const uint64_t strips = dispatch::factor_strips(f.cols);
  const uint64_t chunk = local / strips;
  const uint64_t strip = local % strips;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const uint64_t c0 = strip * dispatch::kFactorTileCols + 4 * lane;
  const uint64_t c1 = c0 + 128;
  const uint64_t row0 = chunk * dispatch::kFactorChunkRows;
  double col[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  bool bad = false;
  // Two rows per iteration: four loads in flight per thread before any use.
  // (Four rows were tried on an H100: 80 registers, 3 blocks per SM, and the
  // Llama 98M step's factor sums took 204 against 173 us.)
#pragma unroll 1
  for (int q = 0; q < kFactorRowsPerWarp; q += 2) {
    const uint64_t ra = row0 + warp + uint64_t(q) * kFactorWarps;
    const uint64_t rb = ra + kFactorWarps;
    float a[8] = {}, b[8] = {};
    const bool has_a = ra < f.rows, has_b = rb < f.rows;  // uniform over the warp
    if (has_a) {
      load_row_group<G>(f, k, ra, c0, a);
      load_row_group<G>(f, k, ra, c1, a + 4);
    }
    if (has_b) {
      load_row_group<G>(f, k, rb, c0, b);
      load_row_group<G>(f, k, rb, c1, b + 4);
    }
    if (!has_a) break;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1 && !has_b) break;
      const float* x = pass == 0 ? a : b;
      const uint64_t r = pass == 0 ? ra : rb;
      double sq[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        bad |= !is_finite_bits(x[e]);
        sq[e] = static_cast<double>(x[e]) * static_cast<double>(x[e]);
        col[e] += sq[e];
      }
      double sum = ((sq[0] + sq[1]) + (sq[2] + sq[3])) + ((sq[4] + sq[5]) + (sq[6] + sq[7]));
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
      if (lane == 0) f.row_sums[strip * f.rows + r] = sum;
    }
  }
  if (f.col_sums != nullptr) {
    __shared__ double warp_cols[kFactorWarps][dispatch::kFactorTileCols];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      warp_cols[warp][4 * lane + e] = col[e];
      warp_cols[warp][128 + 4 * lane + e] = col[4 + e];
    }
    __syncthreads();
    const uint64_t c = strip * dispatch::kFactorTileCols + threadIdx.x;
    if (c < f.cols) {
      double sum = 0.0;
#pragma unroll
      for (int w = 0; w < kFactorWarps; ++w) sum += warp_cols[w][threadIdx.x];  // warp order
      f.col_sums[chunk * f.cols + c] = sum;
    }
  }
  if (fp.finite_check && k.check_finite) {
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicMin(&fp.words->first_bad, f.position);
  }
}

}  // namespace
}  // namespace luminav::cuda

// ---- entry points (extern "C": the names manifest.json lists) ---------------

using luminav::cuda::LaunchParams;

#define LUMINAV_KERNELS_FOR(PN, P, GN, G)                                                         \
  extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize, LUMINAV_CUDA_MIN_BLOCKS) \
      luminav_apply_p##PN##_g##GN(const __grid_constant__ LaunchParams params) {                   \
    luminav::cuda::apply_tile<P, G>(params);                                                       \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)                          \
      luminav_reduce_p##PN##_g##GN(const __grid_constant__ LaunchParams params) {                  \
    luminav::cuda::reduce_tile<P, G>(params);                                                      \
  }

#define LUMINAV_KERNELS_FOR_PARAM(PN, P)                 \
  LUMINAV_KERNELS_FOR(PN, P, f32, LUMINAV_DTYPE_F32)     \
  LUMINAV_KERNELS_FOR(PN, P, bf16, LUMINAV_DTYPE_BF16)   \
  LUMINAV_KERNELS_FOR(PN, P, f16, LUMINAV_DTYPE_F16)

LUMINAV_KERNELS_FOR_PARAM(f32, LUMINAV_DTYPE_F32)
LUMINAV_KERNELS_FOR_PARAM(bf16, LUMINAV_DTYPE_BF16)
LUMINAV_KERNELS_FOR_PARAM(f16, LUMINAV_DTYPE_F16)

// Adds each slot's tile partials in tile order (Note [deterministic reductions]).
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_combine_partials(const __grid_constant__ LaunchParams params) {
  using namespace luminav::cuda;
  const uint32_t j = blockIdx.x;
  Accum a;
  for (uint32_t t = params.first_tile[j] + threadIdx.x; t < params.first_tile[j + 1]; t += kBlockSize) {
    a.add(*reinterpret_cast<const luminav_partials*>(params.tile_partials +
                                                     uint64_t{t} * kTilePartialStride));
  }
  const Accum total = block_sum(a);
  if (threadIdx.x == 0) total.store(&params.tensor_partials[j]);
}

// Reads each slot's exp_avg_sq[0] (the TD-CLM s before the step) into
// params.scalars, so that the host needs one copy, not one per tensor.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_gather_scalars(const __grid_constant__ LaunchParams params) {
  if (threadIdx.x < params.num_slots) params.scalars[threadIdx.x] = params.slots[threadIdx.x].exp_avg_sq[0];
}

// ---- the asynchronous step (Note [device-resident step]) --------------------

using luminav::cuda::CommitParams;
using luminav::cuda::PrepareParams;

// Each group's constants with t, lr and 1/sigma read from device memory, the
// bias corrections formed here in double (spec "Asynchronous devices"); the
// step's shared words reset. One thread per group.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_prepare_step(const __grid_constant__ PrepareParams params) {
  using namespace luminav;
  const uint32_t g = threadIdx.x;
  if (g < params.num_groups) {
    const cuda::PrepareGroup& pg = params.groups[g];
    core::StepConstants k = pg.k;
    const uint64_t step =
        pg.step_counter != nullptr ? static_cast<uint64_t>(*pg.step_counter) + 1 : k.step;
    double lr = pg.lr_host;
    if (pg.lr != nullptr) {
      lr = pg.lr_dtype == LUMINAV_SCALAR_F64 ? *static_cast<const double*>(pg.lr)
                                             : static_cast<double>(*static_cast<const float*>(pg.lr));
    }
    core::set_step_and_lr(k, pg.beta1, pg.beta2, lr, pg.weight_decay, step);
    if (params.grad_scale != nullptr) k.inv_grad_scale = core::inverse_grad_scale(*params.grad_scale);
    params.k_out[g] = k;
  }
  if (g == 0 && params.reset_words) {
    params.words->first_bad = dispatch::kNoBadTensor;
    params.words->blocked =
        (params.status->failed != 0 || (params.found_inf != nullptr && *params.found_inf != 0.0f)) ? 1u : 0u;
  }
}

// The verdict of the step into the caller's status word, and (when the step
// was applied) every group's step counter advanced. One thread.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_commit_step(const __grid_constant__ CommitParams params) {
  using namespace luminav;
  if (threadIdx.x != 0) return;
  luminav_step_status* st = params.status;
  if (params.decide) {
    const dispatch::AsyncStepWords& w = *params.words;
    uint32_t verdict = 0;
    if (st->failed != 0) {
      ++st->refused;
      verdict = st->failed;
    } else if (w.blocked) {
      ++st->skipped;
      verdict = LUMINAV_VERDICT_FOUND_INF;
    } else if (w.first_bad != dispatch::kNoBadTensor) {
      verdict = w.first_bad + 1;
      if (params.found_inf != nullptr) *params.found_inf = 1.0f;
      if (params.skip_nonfinite) ++st->skipped;
      else st->failed = verdict;
    }
    st->verdict = verdict;
  }
  if (st->verdict != 0) return;
  for (uint32_t i = 0; i < params.num_counters; ++i) *params.step_counters[i] += 1.0f;
}

// ---- the sharded step (Note [sharded phases on the device] in cuda_backend.cc)

// One block; thread j works on slot j (kMaxSlots <= kBlockSize). Header:
// this rank's found_inf or earlier failure (prepare's `blocked`) into the
// exchange header. Pack: the slot's combined partials (and its elements)
// into its record; nothing when the step is blocked (the exchange is zero).
// Fold: the all-reduced record into the slot's globals (core's
// fold_round_sums, as the unsharded step's finalize), the smallest position
// of a non-finite logical tensor into first_bad, and any rank's found_inf
// into `blocked`.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_sharded_exchange(const __grid_constant__ LaunchParams params) {
  using namespace luminav;
  using namespace luminav::cuda;
  dispatch::AsyncStepWords* w = params.words;
  const uint32_t j = threadIdx.x;
  if (params.exchange_mode == kExchangeHeader) {
    if (j == 0) params.exchange[0] = w->blocked != 0 ? 1.0 : 0.0;
    return;
  }
  const int round = static_cast<int>(params.round);
  if (params.exchange_mode == kExchangeFold && round == 0 && params.exchange[0] != 0.0) {
    if (j == 0) w->blocked = 1u;
    return;
  }
  if (w->blocked != 0 || j >= params.num_slots) return;
  const TensorSlot& s = params.slots[j];
  double* record = params.exchange + core::kExchangeHeaderDoubles + uint64_t{s.position} * core::kExchangeRecordDoubles;
  if (params.exchange_mode == kExchangePack) {
    core::store_exchange_record(params.tensor_partials[j], s.num_elements, record);
    return;
  }
  const core::StepConstants& k = *params.k_device;
  const luminav_partials sum = core::load_exchange_record(record);
  const uint64_t logical_n = core::exchange_record_elements(record);
  if (core::round_has_grad_sums(round) && k.check_finite && sum.nonfinite_count > 0) {
    atomicMin(&w->first_bad, s.position);
  }
  const float s_old = (k.tdclm && round == 0 && s.moment_kind == static_cast<uint32_t>(core::SecondMoment::kTensor))
                          ? s.exp_avg_sq[0] : 0.0f;
  core::fold_round_sums(k, sum, logical_n, round, s_old, params.finalized[params.globals_base + j]);
}

// ---- TD-CLM factors (Note [factors on the device]) ---------------------------

using luminav::cuda::FactorParams;

#define LUMINAV_FACTOR_SUMS_FOR(GN, G)                                       \
  extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)   \
      luminav_factor_sums_g##GN(const __grid_constant__ FactorParams params) { \
    luminav::cuda::factor_sums<G>(params);                                   \
  }
LUMINAV_FACTOR_SUMS_FOR(f32, LUMINAV_DTYPE_F32)
LUMINAV_FACTOR_SUMS_FOR(bf16, LUMINAV_DTYPE_BF16)
LUMINAV_FACTOR_SUMS_FOR(f16, LUMINAV_DTYPE_F16)

namespace luminav::cuda {
namespace {

// A row's sum of g^2: its strips' partials added in strip order (Note
// [factor tiles]).
__device__ __forceinline__ double row_sum_of(const FactorSlot& f, uint64_t r) {
  const uint64_t strips = dispatch::factor_strips(f.cols);
  double sum = 0.0;
  for (uint64_t q = 0; q < strips; ++q) sum += f.row_sums[q * f.rows + r];  // strip order
  return sum;
}

// The new row factor of row r (local rows: a shard's own).
__device__ __forceinline__ float new_row_factor(const FactorSlot& f, const core::StepConstants& k, uint64_t r) {
  const float row = core::factor_ema(k, f.old_factors[r], core::factor_mean(row_sum_of(f, r), static_cast<double>(f.cols)));
  f.row_new[r] = row;
  return row;
}

// The new row factors of all of a slot's rows and their sum in double by the
// block's fixed tree (valid in thread 0): the sharded step's one block per tensor.
__device__ double update_row_factors(const FactorSlot& f, const core::StepConstants& k) {
  Accum a;
  for (uint64_t r = threadIdx.x; r < f.rows; r += kBlockSize) a.grad_sq += static_cast<double>(new_row_factor(f, k, r));
  return block_sum(a).grad_sq;
}

// The view pass 2 reads (Note [factors on the device]); thread 0.
__device__ void write_factor_view(const FactorSlot& f) {
  FactorView v;
  v.row = f.row_new;
  v.col = f.col_new;
  v.col_over_rho = f.col_over_rho;
  v.rows = f.rows;
  v.cols = f.cols;
  v.by_cols = core::invariant_divisor(f.cols >> 32 == 0 ? static_cast<uint32_t>(f.cols) : 1u);
  *f.view = v;
}

// Column c's new factor and col/rho from its sum of g^2 over the logical
// tensor's `logical_rows` rows.
__device__ __forceinline__ void new_column_factor(const FactorSlot& f, const core::StepConstants& k, float rho,
                                                  uint64_t logical_rows, uint64_t c, double column_sum) {
  const float col = core::factor_ema(k, f.old_factors[f.rows + c],
                                     core::factor_mean(column_sum, static_cast<double>(logical_rows)));
  f.col_new[c] = col;
  f.col_over_rho[c] = core::column_over_rho(col, rho);
}

// The same for every column of the slot (one block).
template <class ColumnSum>
__device__ void update_column_factors(const FactorSlot& f, const core::StepConstants& k, float rho,
                                      uint64_t logical_rows, ColumnSum column_sum) {
  for (uint64_t c = threadIdx.x; c < f.cols; c += kBlockSize) new_column_factor(f, k, rho, logical_rows, c, column_sum(c));
}

// A slot's column sums of g^2, its chunks added in chunk order.
__device__ __forceinline__ double chunked_column_sum(const FactorSlot& f, uint64_t c) {
  const uint64_t chunks = dispatch::factor_chunks(f.rows);
  // Eight loads in flight, then added in chunk order: the same bits as one
  // chunk at a time, without a load's latency per chunk (an 8,192-row tensor
  // has 64 chunks): luminav_factor_cols of the Llama 98M step took 14.9 us
  // with one load at a time and 5.3 us with eight (H100).
  double sum = 0.0;
  uint64_t q = 0;
  for (; q + 8 <= chunks; q += 8) {
    double v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = f.col_sums[(q + e) * f.cols + c];
#pragma unroll
    for (int e = 0; e < 8; ++e) sum += v[e];  // chunk order
  }
  for (; q < chunks; ++q) sum += f.col_sums[q * f.cols + c];  // chunk order
  return sum;
}

}  // namespace
}  // namespace luminav::cuda

// Note [factor tiles]: block b of a slot forms the new row factors of rows
// [kFactorRowBlock b, +kFactorRowBlock) (a thread per row) and their sum in
// double by the block's fixed tree.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_factor_rows(const __grid_constant__ FactorParams params) {
  using namespace luminav;
  using namespace luminav::cuda;
  static_assert(dispatch::kFactorRowBlock == kBlockSize, "a thread per row");
  if (params.words->blocked) return;
  uint32_t local = 0;
  const FactorSlot& f = *factor_slot_of(params, &local);
  const core::StepConstants& k = *params.k_device;
  const uint64_t r = uint64_t{local} * dispatch::kFactorRowBlock + threadIdx.x;
  Accum a;
  if (r < f.rows) a.grad_sq = static_cast<double>(new_row_factor(f, k, r));
  const double sum = block_sum(a).grad_sq;
  if (threadIdx.x == 0) f.row_block_sums[local] = sum;
}

// Block b of a slot: rho (the row blocks' sums added by the block's fixed
// tree, the same bits in every block), the new column factors and col/rho
// of columns [kBlockSize b, +kBlockSize); block 0 also writes rho and R into
// the tensor's globals and the view pass 2 reads. A row tensor has one block.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_factor_cols(const __grid_constant__ FactorParams params) {
  using namespace luminav;
  using namespace luminav::cuda;
  if (params.words->blocked) return;
  uint32_t local = 0;
  const FactorSlot& f = *factor_slot_of(params, &local);
  const core::StepConstants& k = *params.k_device;
  Accum a;
  const uint64_t row_blocks = dispatch::factor_row_blocks(f.rows);
  for (uint64_t b = threadIdx.x; b < row_blocks; b += kBlockSize) a.grad_sq += f.row_block_sums[b];  // block order
  const double row_sum = block_sum(a).grad_sq;
  __shared__ float rho;
  if (threadIdx.x == 0) {
    rho = core::factor_mean(row_sum, static_cast<double>(f.rows));
    if (local == 0) {
      f.globals->row_factor_mean = rho;
      f.globals->logical_rows = f.rows;
      write_factor_view(f);
    }
  }
  __syncthreads();
  if (f.col_new == nullptr) return;
  const uint64_t c = uint64_t{local} * kBlockSize + threadIdx.x;
  if (c >= f.cols) return;
  new_column_factor(f, k, rho, f.rows, c, chunked_column_sum(f, c));
}

// The sharded step's factors (Note [sharded phases on the device] in
// cuda_backend.cc), one block per tensor. Pack (after the factor sums of
// round 0): this shard's new row factors, their sum and row count into its
// exchange record, its column sums into the exchange. Finish (after the
// fold gave rho and R of the logical tensor): the column factors from the
// all-reduced column sums, and the view.
extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)
    luminav_sharded_factors(const __grid_constant__ FactorParams params) {
  using namespace luminav;
  using namespace luminav::cuda;
  if (params.words->blocked) return;
  const FactorSlot& f = params.slots[blockIdx.x];
  const core::StepConstants& k = *params.k_device;
  double* record = params.exchange + core::kExchangeHeaderDoubles + uint64_t{f.position} * core::kExchangeRecordDoubles;
  if (params.mode == kExchangePack) {
    const double row_sum = update_row_factors(f, k);
    if (threadIdx.x == 0) {
      record[5] = row_sum;                       // luminav_partials.row_factor_sum
      record[6] = static_cast<double>(f.rows);   // luminav_partials.row_count
    }
    if (f.col_new == nullptr) return;
    for (uint64_t c = threadIdx.x; c < f.cols; c += kBlockSize) {
      params.exchange[f.exchange_cols + c] = chunked_column_sum(f, c);
    }
    return;
  }
  if (threadIdx.x == 0) write_factor_view(f);
  if (f.col_new == nullptr) return;
  const float rho = f.globals->row_factor_mean;
  const uint64_t logical_rows = f.globals->logical_rows;
  update_column_factors(f, k, rho, logical_rows, [&](uint64_t c) { return params.exchange[f.exchange_cols + c]; });
}
