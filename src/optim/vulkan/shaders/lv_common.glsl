// LuminaV per-element math in GLSL (spec/luminav-update.md), written once for
// every Vulkan shader. GLSL cannot include the core's C++ (core/update_math.h,
// core/half_convert.h, core/stochastic_hash.h); this file states the same
// formulas in the same order of operations, and tests/optim/test_vulkan_backend.py
// checks them against the float64 NumPy reference. Every arithmetic result is
// `precise` so that the compiler forms no FMA (the C++ core is built without
// contraction and the CUDA kernels with -fmad=false).
//
// Compile-time: PARAM_DTYPE, GRAD_DTYPE (0 f32, 1 bf16, 2 f16); LV_INT64 (1: the
// hash in 64-bit integers, 0: in pairs of 32-bit words, for devices without
// shaderInt64; the bits are the same); LV_FLOAT_CONTROLS (1: fp32 subnormals,
// signed zeros, Inf and NaN kept by SPIR-V execution modes, for devices that
// flush subnormals by default, such as NVIDIA's; the context picks it where
// the device offers both modes); LV_SPECIALIZED (1: the step's optional paths
// gated by a specialization constant, for CPU devices: Note [CPU specialization]).
#ifndef LV_INT64
#define LV_INT64 1
#endif
#ifndef LV_FLOAT_CONTROLS
#define LV_FLOAT_CONTROLS 0
#endif
#if LV_INT64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if LV_FLOAT_CONTROLS
#extension GL_EXT_spirv_intrinsics : require
// DenormPreserve (4459, capability 4464) and SignedZeroInfNanPreserve (4461,
// capability 4466) for 32-bit floats: the spec keeps subnormals.
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 32);
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);
#endif
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#ifndef PARAM_DTYPE
#define PARAM_DTYPE 0
#endif
#ifndef GRAD_DTYPE
#define GRAD_DTYPE 0
#endif

// Note [CPU specialization]: llvmpipe (lavapipe, Mesa 22.3) runs a shader's
// lanes as SIMD vectors and turns every `if` into a lane mask without a jump,
// so both sides of a branch run for every element, even where the condition
// is the same for the whole dispatch (tau > 0 costs the double-precision tanh
// for every element whether tau is set or not; pass 1 computes the update
// for its sums when no sums are wanted). On CPU devices the context compiles
// the _sp variants of lv_reduce and lv_apply (LV_SPECIALIZED=1) with
// LV_FEATURES, a specialization constant, set to the paths the job can take
// (vulkan_passes.cc: shader_features); the compiler then drops the others.
// Elsewhere LV_MAY(bit, cond) is just (cond): the SPIR-V the GPUs run is
// unchanged. Bits: vulkan_layout.h (kFeature*), which the host keeps equal.
#ifndef LV_SPECIALIZED
#define LV_SPECIALIZED 0
#endif
#define LV_F_LAM 1u
#define LV_F_TAU 2u
#define LV_F_CAUTIOUS 4u
#define LV_F_BOUND_TENSOR 8u
#define LV_F_BOUND_ELEMENT 16u
#define LV_F_MASTER 32u
#define LV_F_STOCHASTIC 64u
#define LV_F_UPDATE_SUMS 128u
#define LV_F_ELEMENTWISE 256u
#define LV_F_TENSOR 512u
#define LV_F_ROW 1024u
#define LV_F_FACTORED 2048u
#if LV_SPECIALIZED
layout(constant_id = 0) const uint LV_FEATURES = 0xffffffffu;
#define LV_MAY(bit, cond) ((LV_FEATURES & (bit)) != 0u && (cond))
#else
#define LV_MAY(bit, cond) (cond)
#endif

#define WORKGROUP 256u
#define TILE_ITEMS 16u  // elements per thread in a reduction tile (tile = 4096)
#define ROW_BLOCK 64u   // rows per block of TD-CLM's column sums (vulkan_layout.h: kRowBlock)

// Second-moment layouts (core/second_moment_layout.h).
#define KIND_ELEMENTWISE 0u
#define KIND_TENSOR 1u
#define KIND_ROW 2u
#define KIND_FACTORED 3u

// The step's constants of one tensor (vulkan/vulkan_layout.h: StepParams).
// A 64-bit word: uint64_t, or uvec2(low, high) without int64 (the same 8 bytes
// and alignment in std430 and push constants).
#if LV_INT64
#define LV_U64 uint64_t
#else
#define LV_U64 uvec2
#endif

layout(std430, set = 0, binding = 0) readonly buffer Params {
  LV_U64 seed;
  LV_U64 step;
  float lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, decay_factor;
  float inv_bias_correction1, inv_bias_correction2, lam, one_minus_lam, tau, bound_ratio;
  float inv_grad_scale, second_moment, cautious_scale, bound_scale;
  uint kind, cautious, bound_mode, stochastic_rounding, has_master;
  uint want_grad_sums, want_update_sums, cols;
} P;

// One dispatch over one chunk (vulkan/vulkan_layout.h: ChunkPush). A shift
// is the element offset of the chunk inside its bound range (descriptor
// offsets are aligned to minStorageBufferOffsetAlignment, elements are not).
layout(push_constant) uniform Chunk {
  uint n;
  uint param_shift, grad_shift, m_shift, v_shift, master_shift, factor_shift;
  uint rows;        // whole rows of this chunk (row layouts)
  LV_U64 index_base;  // logical index of the chunk's element 0
} pc;

#if PARAM_DTYPE == 0
layout(std430, set = 0, binding = 1) buffer ParamBuf { float param[]; };
#else
layout(std430, set = 0, binding = 1) buffer ParamBuf { uint16_t param[]; };
#endif
#if GRAD_DTYPE == 0
layout(std430, set = 0, binding = 2) readonly buffer GradBuf { float grad[]; };
#else
layout(std430, set = 0, binding = 2) readonly buffer GradBuf { uint16_t grad[]; };
#endif
layout(std430, set = 0, binding = 3) buffer MBuf { float exp_avg[]; };
layout(std430, set = 0, binding = 4) buffer VBuf { float exp_avg_sq[]; };
layout(std430, set = 0, binding = 5) buffer MasterBuf { float master[]; };
// Row factors of the chunk's rows, then col_c / rho of every column.
layout(std430, set = 0, binding = 6) readonly buffer FactorBuf { float factor[]; };

// ---- conversions (core/half_convert.h) ---------------------------------------

float bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }

uint f32_to_bf16_rne(float x) {
  uint u = floatBitsToUint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x0040u) & 0xffffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

uint f32_to_bf16_stochastic(float x, uint r) {
  const uint u = floatBitsToUint(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return f32_to_bf16_rne(x);
  const uint nearest = f32_to_bf16_rne(x);
  if ((nearest & 0x7fffu) == 0x7f80u) return nearest;
  const uint h = (u + (r & 0xffffu)) >> 16;
  if ((h & 0x7fffu) == 0x7f80u) return nearest;
  return h;
}

float f16_to_f32(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  uint exponent = (h >> 10) & 0x1fu;
  uint mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0u) {
    if (mantissa == 0u) return uintBitsToFloat(sign);
    // m * 2^-24 with m < 2^10: move the leading one to bit 10.
    const int lead = findMSB(mantissa);  // 0..9
    const uint shift = uint(10 - lead);
    mantissa <<= shift;
    exponent = 127u - 15u + 1u - shift;
    return uintBitsToFloat(sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13));
  }
  return uintBitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint f32_to_f16_rne(float x) {
  const uint u = floatBitsToUint(x);
  const uint sign = (u >> 16) & 0x8000u;
  const uint a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a >= 0x38800000u) {
    uint r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (r >> 13);
  }
  const uint exponent = a >> 23;
  if (exponent == 0u) return sign;
  const uint shift = 126u - exponent;
  if (shift > 24u) return sign;
  const uint mantissa = (a & 0x7fffffu) | 0x800000u;
  uint m = mantissa >> shift;
  const uint rest = mantissa & ((1u << shift) - 1u);
  const uint half_ = 1u << (shift - 1u);
  if (rest > half_ || (rest == half_ && (m & 1u) != 0u)) ++m;
  return sign | m;
}

// Note [exact threshold] of core/half_convert.h: r * 2^-32 < f exactly iff
// r < ceil(f * 2^32), with f * 2^32 exact in fp32.
uint f32_to_f16_stochastic(float x, uint r) {
  const uint a = floatBitsToUint(x) & 0x7fffffffu;
  if (a >= 0x477fe000u) return f32_to_f16_rne(x);
  const uint nearest = f32_to_f16_rne(x);
  const float abs_x = uintBitsToFloat(a);
  const float abs_nearest = f16_to_f32(nearest & 0x7fffu);
  if (abs_nearest == abs_x) return nearest;
  const uint lo = abs_nearest > abs_x ? nearest - 1u : nearest;
  const uint hi = lo + 1u;
  const float abs_lo = f16_to_f32(lo & 0x7fffu);
  const float abs_hi = f16_to_f32(hi & 0x7fffu);
  precise const float fraction = (abs_x - abs_lo) / (abs_hi - abs_lo);
  // An integer in [1, 2^32] held exactly in fp32; below 2^32 it fits a uint.
  const float threshold = ceil(fraction * 4294967296.0);
  return (threshold >= 4294967296.0 || r < uint(threshold)) ? hi : lo;
}

// ---- stochastic rounding bits (core/stochastic_hash.h) ----------------------

#if LV_INT64
uint rounding_bits(uint64_t seed, uint64_t step, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ul + step * 0xBF58476D1CE4E5B9ul + index * 0x94D049BB133111EBul;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ul;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBul;
  z ^= z >> 31;
  return uint(z >> 32);
}

uint64_t element_index(uint64_t base, uint i) { return base + uint64_t(i); }
#else
// The same arithmetic mod 2^64 on uvec2(low, high): a product keeps the low
// 64 bits of the 128 (low x low in full, the cross terms' low words into high).
uvec2 add64(uvec2 a, uvec2 b) {
  uint carry;
  const uint low = uaddCarry(a.x, b.x, carry);
  return uvec2(low, a.y + b.y + carry);
}

uvec2 mul64(uvec2 a, uvec2 b) {
  uint high, low;
  umulExtended(a.x, b.x, high, low);
  return uvec2(low, high + a.x * b.y + a.y * b.x);
}

uvec2 xor_shift_right(uvec2 z, uint s) {  // z ^ (z >> s), 0 < s < 32
  return z ^ uvec2((z.x >> s) | (z.y << (32u - s)), z.y >> s);
}

uint rounding_bits(uvec2 seed, uvec2 step, uvec2 index) {
  const uvec2 k1 = uvec2(0x7F4A7C15u, 0x9E3779B9u);  // 0x9E3779B97F4A7C15
  const uvec2 k2 = uvec2(0x1CE4E5B9u, 0xBF58476Du);  // 0xBF58476D1CE4E5B9
  const uvec2 k3 = uvec2(0x133111EBu, 0x94D049BBu);  // 0x94D049BB133111EB
  uvec2 z = add64(add64(mul64(seed, k1), mul64(step, k2)), mul64(index, k3));
  z = mul64(xor_shift_right(z, 30u), k2);
  z = mul64(xor_shift_right(z, 27u), k3);
  return xor_shift_right(z, 31u).y;
}

uvec2 element_index(uvec2 base, uint i) { return add64(base, uvec2(i, 0u)); }
#endif

// ---- tanh within the spec's 2 ulp -------------------------------------------
// GLSL's tanh has no useful precision guarantee in Vulkan, so (as the simd
// backend, Note [tanh accuracy]) tanh is formed in double as
// expm1(2|x|) / (expm1(2|x|) + 2) and rounded once; |x| > 10 gives +-1.
// expm1 in double: Cody-Waite reduction by ln 2 (fdlibm's split) and the
// Taylor series to r^13 on |r| <= ln2/2 (truncation < 1e-17 relative).
double expm1_positive(double x) {
  const double ln2_hi = 6.93147180369123816490e-01LF;
  const double ln2_lo = 1.90821492927058770002e-10LF;
  const double k = floor(x * 1.44269504088896338700LF + 0.5LF);
  precise const double r = (x - k * ln2_hi) - k * ln2_lo;
  precise double p = 1.0LF / 6227020800.0LF;  // 1/13!
  p = p * r + 1.0LF / 479001600.0LF;
  p = p * r + 1.0LF / 39916800.0LF;
  p = p * r + 1.0LF / 3628800.0LF;
  p = p * r + 1.0LF / 362880.0LF;
  p = p * r + 1.0LF / 40320.0LF;
  p = p * r + 1.0LF / 5040.0LF;
  p = p * r + 1.0LF / 720.0LF;
  p = p * r + 1.0LF / 120.0LF;
  p = p * r + 1.0LF / 24.0LF;
  p = p * r + 1.0LF / 6.0LF;
  p = p * r + 0.5LF;
  p = p * r * r + r;  // expm1(r)
  if (k == 0.0LF) return p;
  const double scale = double(1u << uint(k));  // k <= 29 for x <= 20
  return (p + 1.0LF) * scale - 1.0LF;
}

float accurate_tanh(float x) {
  const double a = abs(double(x));
  if (!(a <= 10.0LF)) return a > 10.0LF ? sign(x) : x;  // saturate; NaN stays NaN
  precise const double e = expm1_positive(a + a);
  precise const double t = e / (e + 2.0LF);
  return x < 0.0 ? -float(t) : float(t);
}

// ---- the update (core/update_math.h) ----------------------------------------

float scaled_gradient(float g) {
  precise float s = g * P.inv_grad_scale;
  return P.inv_grad_scale == 1.0 ? g : s;
}

float first_moment(float m_old, float g) {
  precise float m = P.beta1 * m_old + P.one_minus_beta1 * g;
  return m;
}

float second_moment_update(float v_old, float g) {
  precise float v = P.beta2 * v_old + (P.one_minus_beta2 * g) * g;
  return v;
}

float raw_update(float m, float second, float g) {
  precise float n = m * P.inv_bias_correction1;
  if (LV_MAY(LV_F_LAM, P.lam != 0.0)) n = P.one_minus_lam * n + P.lam * g;
  precise float den = sqrt(second * P.inv_bias_correction2) + P.eps;
  precise float u = n / den;
  if (LV_MAY(LV_F_TAU, P.tau > 0.0)) {
    precise float inner = u / P.tau;
    u = P.tau * accurate_tanh(inner);
  }
  return u;
}

float cautious_masked(float u, float g) {
  precise float ug = u * g;
  return (LV_MAY(LV_F_CAUTIOUS, P.cautious != 0u) && !(ug > 0.0)) ? 0.0 : u;
}

float apply_update(float x, float u, float g) {
  if (LV_MAY(LV_F_CAUTIOUS, P.cautious != 0u)) {
    precise float ug = u * g;
    precise float scaled = (ug > 0.0 ? u : 0.0) * P.cautious_scale;
    u = scaled;
  }
  precise float d = P.lr * u;
  if (LV_MAY(LV_F_BOUND_TENSOR, P.bound_mode == 1u)) {
    d = d * P.bound_scale;
  } else if (LV_MAY(LV_F_BOUND_ELEMENT, P.bound_mode == 2u)) {
    precise float b = P.bound_ratio * sqrt(x * x + 1e-4);
    d = min(max(d, -b), b);
  }
  precise float x_new = x * P.decay_factor - d;
  return x_new;
}

// ---- element access ----------------------------------------------------------

float load_grad(uint i) {
#if GRAD_DTYPE == 0
  const float g = grad[pc.grad_shift + i];
#elif GRAD_DTYPE == 1
  const float g = bf16_to_f32(uint(grad[pc.grad_shift + i]));
#else
  const float g = f16_to_f32(uint(grad[pc.grad_shift + i]));
#endif
  return scaled_gradient(g);
}

float load_weight(uint i) {
  if (LV_MAY(LV_F_MASTER, P.has_master != 0u)) return master[pc.master_shift + i];
#if PARAM_DTYPE == 0
  return param[pc.param_shift + i];
#elif PARAM_DTYPE == 1
  return bf16_to_f32(uint(param[pc.param_shift + i]));
#else
  return f16_to_f32(uint(param[pc.param_shift + i]));
#endif
}

void store_param(uint i, float x) {
#if PARAM_DTYPE == 0
  param[pc.param_shift + i] = x;
#else
  const uint r =
      LV_MAY(LV_F_STOCHASTIC, P.stochastic_rounding != 0u) ? rounding_bits(P.seed, P.step, element_index(pc.index_base, i)) : 0u;
#if PARAM_DTYPE == 1
  const uint h = LV_MAY(LV_F_STOCHASTIC, P.stochastic_rounding != 0u) ? f32_to_bf16_stochastic(x, r) : f32_to_bf16_rne(x);
#else
  const uint h = LV_MAY(LV_F_STOCHASTIC, P.stochastic_rounding != 0u) ? f32_to_f16_stochastic(x, r) : f32_to_f16_rne(x);
#endif
  param[pc.param_shift + i] = uint16_t(h);
#endif
}

// The element's second moment as the update reads it (vhat, v or s); `v_new`
// is the updated per-element v (KIND_ELEMENTWISE) to store.
float element_second(uint i, float g, out float v_new) {
  v_new = 0.0;
  if (LV_MAY(LV_F_ELEMENTWISE, P.kind == KIND_ELEMENTWISE)) {
    v_new = second_moment_update(exp_avg_sq[pc.v_shift + i], g);
    return v_new;
  }
  if (LV_MAY(LV_F_TENSOR, P.kind == KIND_TENSOR)) return P.second_moment;
#if LV_SPECIALIZED
  if ((LV_FEATURES & (LV_F_ROW | LV_F_FACTORED)) == 0u) return 0.0;  // not this job's layout
#endif
  const uint r = i / P.cols;
  const float row = factor[pc.factor_shift + r];
  if (P.kind == KIND_ROW) return row;
  precise float vhat = row * factor[pc.factor_shift + pc.rows + (i - r * P.cols)];
  return vhat;
}

// ---- reductions with a fixed combination order --------------------------------
// Note [fixed combination order]: a butterfly of subgroupShuffleXor gives every
// lane the same sum (IEEE addition commutes) in an order fixed by the subgroup
// size, which a device keeps; subgroups then combine in subgroup-id order
// through shared memory and the workgroups' partials in workgroup order on the
// host. The subgroup size is read, never assumed (lavapipe: 8, NVIDIA: 32).
shared double sh_sum[WORKGROUP];

double subgroup_sum_fixed(double v) {
  for (uint offset = gl_SubgroupSize >> 1; offset > 0u; offset >>= 1) v += subgroupShuffleXor(v, offset);
  return v;
}

// Sum of `v` over the workgroup, valid in invocation 0 (barriers inside:
// call from uniform control flow).
double workgroup_sum_fixed(double v) {
  v = subgroup_sum_fixed(v);
  if (subgroupElect()) sh_sum[gl_SubgroupID] = v;
  barrier();
  double total = 0.0LF;
  if (gl_LocalInvocationIndex == 0u) {
    for (uint s = 0u; s < gl_NumSubgroups; ++s) total += sh_sum[s];
  }
  barrier();
  return total;
}
