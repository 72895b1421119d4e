// The host side of the shaders' interface (shaders/lv_common.glsl): the
// per-tensor constants block, the per-chunk push constants, the bindings and
// the reduction's tile partial. Keep both sides in step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminav::vulkan {

// Set 0, binding 0 (std430).
struct StepParams {
  uint64_t seed, step;
  float lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, decay_factor;
  float inv_bias_correction1, inv_bias_correction2, lam, one_minus_lam, tau, bound_ratio;
  float inv_grad_scale, second_moment, cautious_scale, bound_scale;
  uint32_t kind, cautious, bound_mode, stochastic_rounding, has_master;
  uint32_t want_grad_sums, want_update_sums, cols;
};
static_assert(sizeof(StepParams) == 16 + 17 * 4 + 8 * 4 + 4, "StepParams mirrors lv_common.glsl");
inline constexpr size_t kParamsSlotBytes = 256;  // >= any minStorageBufferOffsetAlignment

// The optional paths of lv_reduce / lv_apply (lv_common.glsl: LV_F_*), the
// specialization constant of their _sp variants on CPU devices (Note [CPU
// specialization]). kAllFeatures: nothing dropped.
enum Feature : uint32_t {
  kFeatureLam = 1u << 0,
  kFeatureTau = 1u << 1,
  kFeatureCautious = 1u << 2,
  kFeatureBoundTensor = 1u << 3,
  kFeatureBoundElement = 1u << 4,
  kFeatureMaster = 1u << 5,
  kFeatureStochastic = 1u << 6,
  kFeatureUpdateSums = 1u << 7,
  kFeatureKind0 = 1u << 8,  // bit 8 + StepParams::kind (elementwise, tensor, row, factored)
};
inline constexpr uint32_t kAllFeatures = 0xffffffffu;

// The paths a pipeline must keep for a job with these constants. Each bit
// holds whenever the shader's own condition can hold while the job runs,
// including what the asynchronous step's finalize writes on the device
// (lv_finalize.comp sets want_update_sums for cautious or the tensor bound,
// as core::needs_update_sums); the values it rewrites (lr, scales, s) gate nothing.
inline uint32_t shader_features(const StepParams& q) {
  uint32_t f = kFeatureKind0 << (q.kind & 3u);
  if (q.lam != 0.0f) f |= kFeatureLam;
  if (q.tau > 0.0f) f |= kFeatureTau;
  if (q.cautious != 0) f |= kFeatureCautious;
  if (q.bound_mode == 1) f |= kFeatureBoundTensor;
  if (q.bound_mode == 2) f |= kFeatureBoundElement;
  if (q.has_master != 0) f |= kFeatureMaster;
  if (q.stochastic_rounding != 0) f |= kFeatureStochastic;
  if (q.want_update_sums != 0 || q.cautious != 0 || q.bound_mode == 1) f |= kFeatureUpdateSums;
  return f;
}

struct ChunkPush {
  uint32_t n;
  uint32_t param_shift, grad_shift, m_shift, v_shift, master_shift, factor_shift;
  uint32_t rows;
  uint64_t index_base;
};
static_assert(sizeof(ChunkPush) == 40 && offsetof(ChunkPush, index_base) == 32);

// lv_reduce.comp's output, one per tile.
struct TilePartial {
  double grad_sq, update_sq, weight_sq;
  uint32_t nonfinite, agree;
};
static_assert(sizeof(TilePartial) == 32);

// lv_finalize.comp (the asynchronous step's finalize) reads and writes the
// constants by word: keep its WORD_* defines in step with these offsets.
static_assert(offsetof(StepParams, bound_ratio) == 16 * 4 && offsetof(StepParams, cautious_scale) == 19 * 4 &&
                  offsetof(StepParams, bound_scale) == 20 * 4 && offsetof(StepParams, cautious) == 22 * 4 &&
                  offsetof(StepParams, bound_mode) == 23 * 4,
              "StepParams words as lv_finalize.comp reads them");

// lv_finalize.comp's push constants (the pipeline layout's 40 bytes); *_at
// are uint32 word offsets into the step's arena. mode kFinalizePrepare:
// the constants of the tensors whose step count is read on the device are
// chosen (Note [device step counter] in vulkan_async.cc); kFinalizeDecide:
// the verdict, the scales, the status, the counters and found_inf.
// kFinalizeFactors (TD-CLM, between pass 1's round 0 and the rest): each
// tensor's new second moment (FactorJob).
inline constexpr uint32_t kFinalizeDecide = 0, kFinalizePrepare = 1, kFinalizeFactors = 2;
struct FinalizePush {
  uint32_t jobs, jobs_at, chunks_at, args_at, args, skip_nonfinite;
  uint32_t increments_at, increments;  // the step counters' slots to advance when the step applies
  uint32_t mode;
  uint32_t found_inf;  // its slot + 1, or 0
};
static_assert(sizeof(FinalizePush) == sizeof(ChunkPush));

// One tensor of the finalize (12 words); its chunks' tile partials are
// `chunks` FinalizeChunk entries from `first_chunk`. counter: the slot + 1
// of its group's step counter (0: none); then its constants at step
// base + 1 + i are the i-th of `alternatives` slots of kParamsSlotBytes at
// word `alternatives_at`, and the prepare copies the one of the counter's
// value into its constants at `params_at`. factor_at: the word of its
// FactorJob (TD-CLM tensor/row/factored), else 0.
struct FinalizeJob {
  uint32_t first_chunk, chunks, position, check_finite, params_at, counter;
  double num_elements;
  uint32_t base, alternatives, alternatives_at, factor_at;
};
// A TD-CLM tensor's second moment formed on the device (lv_finalize.comp,
// factors mode), word offsets into the arena: `length` floats of the old one
// at old_at (copied from exp_avg_sq), the new one written at new_at (stored
// into exp_avg_sq after pass 2 when the step applies); row/factored: its
// chunks' FactorRegion entries from word first_region and, factored, the
// column totals of g^2 (doubles) at totals_at.
struct FactorJob {
  uint32_t length, rows, cols, old_at, new_at, first_region, regions, totals_at;
};
// One chunk of a row/factored tensor: rows [row0, row0 + rows), the sums of
// g^2 of its rows (doubles) at sums_at, and the factor table pass 2 reads
// (its rows' row_r, then col_c / rho of every column) at table_at.
struct FactorRegion {
  uint32_t row0, rows, sums_at, table_at;
};
static_assert(sizeof(FinalizeJob) == 48 && offsetof(FinalizeJob, num_elements) == 24 &&
              offsetof(FinalizeJob, base) == 32);
struct FinalizeChunk {
  uint32_t partials_at, tiles;  // word offset of the chunk's first TilePartial
};
// What lv_finalize.comp reports about its own step (host-visible).
struct FinalizeOutcome {
  uint32_t applied, first_bad, refused, failed;
};
// The device words of the step counters and found_inf (fp32 each), after
// the status word in one host-visible buffer.
inline constexpr uint32_t kDeviceSlots = 128;
inline constexpr uint32_t kSlotsOffset = 256;  // bytes; >= any minStorageBufferOffsetAlignment

enum Binding : uint32_t {
  kBindParams = 0,
  kBindParam = 1,
  kBindGrad = 2,
  kBindExpAvg = 3,
  kBindExpAvgSq = 4,
  kBindMaster = 5,
  kBindFactor = 6,
  kBindOut = 7,     // tile partials (reduce) or row sums (factor sums)
  kBindOut2 = 8,    // column sums per row block (factor sums)
  kBindingCount = 9
};

inline constexpr uint32_t kWorkgroup = 256;
inline constexpr uint32_t kTileElements = 256 * 16;  // lv_common.glsl: WORKGROUP * TILE_ITEMS
inline constexpr uint32_t kRowBlock = 64;             // lv_factor_sums.comp: ROW_BLOCK
inline constexpr uint32_t kMaxGroups = 65535;         // per dispatch dimension (the spec's minimum)

}  // namespace luminav::vulkan
