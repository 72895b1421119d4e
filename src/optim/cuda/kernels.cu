// LuminaV's CUDA kernels (compiled ahead of time to cubins and PTX): pass-1
// reductions and the pass-2 update, over many tensors per launch.
#include <cstdint>

#include "optim/core/element_io.h"
#include "optim/core/half_convert.h"
#include "optim/core/stochastic_hash.h"
#include "optim/core/update_math.h"
#include "optim/cuda/launch_params.h"

namespace luminav::cuda {
namespace {

using core::ScalarOps;
using core::StepConstants;
using core::TensorGlobals;

// ---- element types ---------------------------------------------------------

// Loads and stores of 8 consecutive elements as 16-byte accesses (fp32: two).
// Single elements (tails, unaligned tensors) go through core/element_io.h.
template <int D>
struct Elem;

template <>
struct Elem<LUMINAV_DTYPE_F32> {
  static __device__ __forceinline__ void load8(const void* base, uint64_t i, float (&out)[8]) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + i);
    const float4 a = p[0], b = p[1];
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
    out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
  }
  static __device__ __forceinline__ void store8(void* base, uint64_t i, const float (&x)[8],
                                                const StepConstants&, uint64_t, uint64_t) {
    float4* p = reinterpret_cast<float4*>(static_cast<float*>(base) + i);
    p[0] = make_float4(x[0], x[1], x[2], x[3]);
    p[1] = make_float4(x[4], x[5], x[6], x[7]);
  }
};

// 16-bit parameters/gradients: conversions and rounding from core (spec
// "Stochastic rounding" / "Conversions"), bit for bit as on the host.
template <bool kBf16>
struct Elem16 {
  static __device__ __forceinline__ float to_f32(uint16_t h) {
    return kBf16 ? core::bf16_to_f32(h) : core::f16_to_f32(h);
  }
  static __device__ __forceinline__ uint16_t from_f32(float x, const StepConstants& k, uint64_t seed,
                                                      uint64_t index) {
    if (k.stochastic_rounding) {
      const uint32_t r = core::rounding_bits(seed, k.step, index);
      return kBf16 ? core::f32_to_bf16_stochastic(x, r) : core::f32_to_f16_stochastic(x, r);
    }
    return kBf16 ? core::f32_to_bf16_rne(x) : core::f32_to_f16_rne(x);
  }
  static __device__ __forceinline__ void load8(const void* base, uint64_t i, float (&out)[8]) {
    const uint4 w = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + i);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      out[2 * e] = to_f32(static_cast<uint16_t>(words[e] & 0xffffu));
      out[2 * e + 1] = to_f32(static_cast<uint16_t>(words[e] >> 16));
    }
  }
  static __device__ __forceinline__ void store8(void* base, uint64_t i, const float (&x)[8],
                                                const StepConstants& k, uint64_t seed, uint64_t index0) {
    uint32_t words[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const uint32_t lo = from_f32(x[2 * e], k, seed, index0 + 2 * e);
      const uint32_t hi = from_f32(x[2 * e + 1], k, seed, index0 + 2 * e + 1);
      words[e] = lo | (hi << 16);
    }
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(base) + i) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
};
template <>
struct Elem<LUMINAV_DTYPE_BF16> : Elem16<true> {};
template <>
struct Elem<LUMINAV_DTYPE_F16> : Elem16<false> {};

// ---- the tile a block works on ----------------------------------------------

struct Tile {
  const TensorSlot* slot;
  uint64_t tile;   // index of the tile inside its tensor
  uint64_t begin;  // element range [begin, end) of the tensor
  uint64_t end;
};

__device__ __forceinline__ Tile block_tile(const LaunchParams& lp) {
  const uint32_t b = blockIdx.x;
  uint32_t lo = 0, hi = lp.num_slots;  // largest j with first_tile[j] <= b
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (lp.first_tile[mid] <= b) lo = mid;
    else hi = mid;
  }
  Tile t;
  t.slot = &lp.slots[lo];
  t.tile = b - lp.first_tile[lo];
  t.begin = t.tile * lp.tile_elems;
  const uint64_t end = t.begin + lp.tile_elems;
  t.end = end < t.slot->num_elements ? end : t.slot->num_elements;
  return t;
}

__device__ __forceinline__ TensorGlobals globals_of(const TensorSlot& s) {
  TensorGlobals g;
  g.second_moment = s.second_moment;
  g.cautious_scale = s.cautious_scale;
  g.bound_scale = s.bound_scale;
  return g;
}

__device__ __forceinline__ bool is_finite_bits(float g) {
  return (core::float_bits(g) & 0x7f800000u) != 0x7f800000u;
}

// ---- pass 2: the update -----------------------------------------------------

// One element's step through core's math (Note [one math, many traversals]).
__device__ __forceinline__ void update_element(const StepConstants& k, const TensorGlobals& gl, float g,
                                               float& m, float& v, float& x) {
  const ScalarOps o;
  const auto e = core::moments_and_update(o, k, gl, m, v, g);
  m = e.m;
  v = e.v;
  x = core::apply_update(o, k, gl, x, e.u, g);
}

template <int P, int G>
__device__ __forceinline__ void apply_vector(const StepConstants& k, const TensorGlobals& gl,
                                             const TensorSlot& s, uint64_t i) {
  float g[8], m[8], v[8], x[8];
  Elem<G>::load8(s.grad, i, g);
  Elem<LUMINAV_DTYPE_F32>::load8(s.exp_avg, i, m);
  if (!k.tdclm) Elem<LUMINAV_DTYPE_F32>::load8(s.exp_avg_sq, i, v);
  if (s.master != nullptr) Elem<LUMINAV_DTYPE_F32>::load8(s.master, i, x);
  else Elem<P>::load8(s.param, i, x);
#pragma unroll
  for (int e = 0; e < 8; ++e) update_element(k, gl, g[e], m[e], v[e], x[e]);
  Elem<LUMINAV_DTYPE_F32>::store8(s.exp_avg, i, m, k, 0, 0);
  if (!k.tdclm) Elem<LUMINAV_DTYPE_F32>::store8(s.exp_avg_sq, i, v, k, 0, 0);
  if (s.master != nullptr) Elem<LUMINAV_DTYPE_F32>::store8(s.master, i, x, k, 0, 0);
  Elem<P>::store8(s.param, i, x, k, s.seed, s.index_offset + i);
}

template <int P, int G>
__device__ __forceinline__ void apply_scalar(const StepConstants& k, const TensorGlobals& gl,
                                             const TensorSlot& s, uint64_t i) {
  const float g = core::load_as_f32<G>(s.grad, i);
  float m = s.exp_avg[i];
  float v = k.tdclm ? 0.0f : s.exp_avg_sq[i];
  float x = s.master != nullptr ? s.master[i] : core::load_as_f32<P>(s.param, i);
  update_element(k, gl, g, m, v, x);
  s.exp_avg[i] = m;
  if (!k.tdclm) s.exp_avg_sq[i] = v;
  if (s.master != nullptr) s.master[i] = x;
  core::store_param<P>(s.param, i, x, k, s.seed, s.index_offset + i);
}

// Calls body(i, vector) for the tile: 8-element groups from the vector path
// where the tensor's buffers are 16-byte aligned, single elements elsewhere.
template <class Body>
__device__ __forceinline__ void for_tile(const Tile& t, Body body) {
  uint64_t scalar_begin = t.begin;
  if (t.slot->vector_ok) {
    const uint64_t vector_end = t.begin + ((t.end - t.begin) / kElemsPerThread) * kElemsPerThread;
    for (uint64_t i = t.begin + threadIdx.x * kElemsPerThread; i < vector_end;
         i += kBlockSize * kElemsPerThread) {
      body(i, true);
    }
    scalar_begin = vector_end;
  }
  for (uint64_t i = scalar_begin + threadIdx.x; i < t.end; i += kBlockSize) body(i, false);
}

template <int P, int G>
__device__ __forceinline__ void apply_tile(const LaunchParams& lp) {
  const Tile t = block_tile(lp);
  const TensorSlot& s = *t.slot;
  const StepConstants& k = lp.k;
  const TensorGlobals gl = globals_of(s);
  // TD-CLM keeps s in the exp_avg_sq slot; the host finalized its new value.
  if (k.tdclm && t.tile == 0 && threadIdx.x == 0) s.exp_avg_sq[0] = gl.second_moment;
  for_tile(t, [&](uint64_t i, bool vector) {
    if (vector) apply_vector<P, G>(k, gl, s, i);
    else apply_scalar<P, G>(k, gl, s, i);
  });
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
// pass 2 will (from the old state, the new moments are not stored).
__device__ __forceinline__ void reduce_element(const StepConstants& k, const TensorGlobals& gl,
                                               uint32_t fields, float g, float m, float v, float x,
                                               Accum& a) {
  if (fields & kReduceGrad) {
    a.nonfinite += is_finite_bits(g) ? 0u : 1u;
    a.grad_sq += static_cast<double>(g) * static_cast<double>(g);
  }
  if (fields & kReduceUpdate) {
    const ScalarOps o;
    const auto e = core::moments_and_update(o, k, gl, m, v, g);
    a.agree += (e.u * g > 0.0f) ? 1u : 0u;
    const double d = core::unscaled_step(o, k, e.u, g);
    a.update_sq += d * d;
    a.weight_sq += static_cast<double>(x) * static_cast<double>(x);
  }
}

template <int P, int G>
__device__ __forceinline__ void reduce_tile(const LaunchParams& lp) {
  const Tile t = block_tile(lp);
  const TensorSlot& s = *t.slot;
  const StepConstants& k = lp.k;
  const TensorGlobals gl = globals_of(s);
  const uint32_t fields = lp.reduce_fields;
  const bool need_state = (fields & kReduceUpdate) != 0;
  Accum a;
  for_tile(t, [&](uint64_t i, bool vector) {
    if (vector) {
      float g[8], m[8], v[8], x[8];
      Elem<G>::load8(s.grad, i, g);
      if (need_state) {
        Elem<LUMINAV_DTYPE_F32>::load8(s.exp_avg, i, m);
        if (!k.tdclm) Elem<LUMINAV_DTYPE_F32>::load8(s.exp_avg_sq, i, v);
        if (s.master != nullptr) Elem<LUMINAV_DTYPE_F32>::load8(s.master, i, x);
        else Elem<P>::load8(s.param, i, x);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) reduce_element(k, gl, fields, g[e], m[e], v[e], x[e], a);
    } else {
      const float g = core::load_as_f32<G>(s.grad, i);
      float m = 0.0f, v = 0.0f, x = 0.0f;
      if (need_state) {
        m = s.exp_avg[i];
        v = k.tdclm ? 0.0f : s.exp_avg_sq[i];
        x = s.master != nullptr ? s.master[i] : core::load_as_f32<P>(s.param, i);
      }
      reduce_element(k, gl, fields, g, m, v, x, a);
    }
  });
  const Accum total = block_sum(a);
  if (threadIdx.x == 0) {
    total.store(reinterpret_cast<luminav_partials*>(lp.tile_partials +
                                                    uint64_t{blockIdx.x} * kTilePartialStride));
  }
}

}  // namespace
}  // namespace luminav::cuda

// ---- entry points (extern "C": the names manifest.json lists) ---------------

using luminav::cuda::LaunchParams;

#define LUMINAV_KERNELS_FOR(PN, P, GN, G)                                                         \
  extern "C" __global__ void __launch_bounds__(luminav::cuda::kBlockSize)                          \
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
