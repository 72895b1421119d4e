#version 460
// The asynchronous step's finalize on the device (spec "Asynchronous
// devices"), one workgroup between pass 1 and pass 2 of one submission
// (vulkan_async.cc): each tensor's tile partials combined in the order of
// Note [tile combination order] (vulkan_tile_order.h, the host's order too),
// the finite verdict over every tensor of the call, the cautious and bound
// scales written into the tensors' constants (core/reduction_rounds.h:
// fold_round_sums, the same formulas), the status word, and, when the step
// must not write (a non-finite gradient, or an earlier failure not yet
// cleared), pass 2's indirect dispatch arguments zeroed so that no
// invocation of it runs. Word offsets into the arena come from the host
// (vulkan_layout.h: FinalizePush, FinalizeJob, kParamsWord*).
// The same shader in prepare mode runs first, before pass 1, where a step
// counter is read on the device (Note [device step counter] in
// vulkan_async.cc): each such tensor's constants are chosen among the ones
// the host formed for the steps the counter can be at. In factors mode, for
// TD-CLM, it forms the new second moment after pass 1's round 0 (factors()). The counters and
// found_inf are fp32 words of binding 1 (the process's slots).
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) buffer Arena { uint w[]; };
layout(std430, set = 0, binding = 1) buffer Slots { uint slot[]; };
layout(std430, set = 0, binding = 7) buffer Status { uint verdict, failed, skipped, refused; } S;
layout(std430, set = 0, binding = 8) writeonly buffer Outcome { uint applied, first_bad, refused_now, failed_now; } O;
layout(push_constant) uniform Push {
  uint jobs, jobs_at, chunks_at, args_at, args, skip_nonfinite, increments_at, increments;
  uint mode, found_inf;
} pc;
#define MODE_PREPARE 1u
#define MODE_FACTORS 2u
#define JOB_WORDS 12u
#define PARAMS_SLOT_WORDS 64u  // kParamsSlotBytes / 4
#define PARAMS_WORDS 30u       // sizeof(StepParams) / 4
#define VERDICT_FOUND_INF 0xFFFFFFFFu

// StepParams words (vulkan_layout.h: static_asserts on the offsets).
#define WORD_BOUND_RATIO 16u
#define WORD_CAUTIOUS_SCALE 19u
#define WORD_BOUND_SCALE 20u
#define WORD_CAUTIOUS 22u
#define WORD_BOUND_MODE 23u
#define BOUND_TENSOR 1u
#define WORD_BETA2 7u
#define WORD_ONE_MINUS_BETA2 8u
#define WORD_SECOND_MOMENT 18u
#define WORD_KIND 21u
#define WORD_WANT_UPDATE_SUMS 27u
// Second-moment kinds (lv_common.glsl, core/second_moment_layout.h).
#define KIND_TENSOR 1u
#define KIND_FACTORED 3u

shared double lane_sum[5][256];  // sum g^2, sum (lr*u*phi)^2, sum x^2, nonfinite, K
shared uint first_bad, refuse, blocked, applied;

double word_double(uint at) { return packDouble2x32(uvec2(w[at], w[at + 1u])); }

// The tensor's tile partials combined in the order of Note [tile combination
// order]; the sums are in lane_sum[k][0] on return (every invocation calls it).
void combine(uint job) {
  const uint l = gl_LocalInvocationID.x;
  const uint first_chunk = w[job], chunks = w[job + 1u];
  double acc[5] = double[5](0.0LF, 0.0LF, 0.0LF, 0.0LF, 0.0LF);
  uint before = 0u;  // tiles of the job's earlier chunks
  for (uint c = 0u; c < chunks; ++c) {
    const uint chunk = pc.chunks_at + 2u * (first_chunk + c);
    const uint at = w[chunk], tiles = w[chunk + 1u];
    // Lane l takes the tiles whose index over the whole tensor is l mod 256.
    for (uint t = (l + 256u - before % 256u) % 256u; t < tiles; t += 256u) {
      const uint p = at + 8u * t;
      acc[0] += word_double(p);
      acc[1] += word_double(p + 2u);
      acc[2] += word_double(p + 4u);
      acc[3] += double(w[p + 6u]);
      acc[4] += double(w[p + 7u]);
    }
    before += tiles;
  }
  for (uint k = 0u; k < 5u; ++k) lane_sum[k][l] = acc[k];
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (l < s) {
      for (uint k = 0u; k < 5u; ++k) lane_sum[k][l] += lane_sum[k][l + s];
    }
    barrier();
  }
}

// Factors (TD-CLM, after pass 1's round 0, before its update sums and pass
// 2): each tensor's new second moment from its old one (copied into the
// arena) and round 0's sums, with the host's formulas (core/factor_update.cc,
// core/update_math.h: factor_mean, factor_ema, column_over_rho) in the same
// order of operations, so the same bits: tensor, s into the constants;
// row/factored, row_r, rho (the updated rows summed in row order in double,
// as core::row_factor_sum) and col_c, then each chunk's factor table (its
// rows, then col_c / rho) that pass 2 reads. Nothing of the caller's is
// written here: the new factors wait in the arena for the guarded store.
// A quotient of two fp32 numbers is formed in double and rounded once to
// fp32, which is the correctly rounded fp32 quotient (53 >= 2 * 24 + 2), as
// the host's fp32 division gives (fp32 OpFDiv may be less exact on a device).
shared double rho_sum;

float ema(uint params, float old, float mean) {
  precise float v = uintBitsToFloat(w[params + WORD_BETA2]) * old + uintBitsToFloat(w[params + WORD_ONE_MINUS_BETA2]) * mean;
  return v;
}

void factors() {
  const uint l = gl_LocalInvocationID.x;
  for (uint j = 0u; j < pc.jobs; ++j) {
    const uint job = pc.jobs_at + JOB_WORDS * j;
    const uint f = w[job + 11u];
    if (f == 0u) continue;
    const uint params = w[job + 4u];
    const uint kind = w[params + WORD_KIND];
    const uint rows = w[f + 1u], cols = w[f + 2u], old_at = w[f + 3u], new_at = w[f + 4u];
    if (kind == KIND_TENSOR) {
      combine(job);
      if (l == 0u) {
        const float q = float(lane_sum[0][0] / word_double(job + 6u));
        const float s = ema(params, uintBitsToFloat(w[old_at]), q);
        w[params + WORD_SECOND_MOMENT] = floatBitsToUint(s);
        w[new_at] = floatBitsToUint(s);
      }
    } else {
      // Rows, chunk by chunk (region: row0, rows, row sums' word, factor table's word).
      const uint first_region = w[f + 5u], regions = w[f + 6u];
      for (uint k = 0u; k < regions; ++k) {
        const uint g = first_region + 4u * k;
        const uint row0 = w[g], chunk_rows = w[g + 1u], sums = w[g + 2u], table = w[g + 3u];
        for (uint r = l; r < chunk_rows; r += 256u) {
          const float mean = float(word_double(sums + 2u * r) / double(cols));
          const float row = ema(params, uintBitsToFloat(w[old_at + row0 + r]), mean);
          w[new_at + row0 + r] = floatBitsToUint(row);
          w[table + r] = floatBitsToUint(row);
        }
      }
      if (kind == KIND_FACTORED) {
        memoryBarrierBuffer();
        barrier();
        if (l == 0u) {
          double sum = 0.0LF;
          for (uint r = 0u; r < rows; ++r) sum += double(uintBitsToFloat(w[new_at + r]));
          rho_sum = sum;
        }
        barrier();
        const float rho = float(rho_sum / double(rows));
        const uint totals = w[f + 7u];
        for (uint c = l; c < cols; c += 256u) {
          const float mean = float(word_double(totals + 2u * c) / double(rows));
          const float col = ema(params, uintBitsToFloat(w[old_at + rows + c]), mean);
          w[new_at + rows + c] = floatBitsToUint(col);
          const float over_rho = rho > 0.0 ? float(double(col) / double(rho)) : 0.0;
          for (uint k = 0u; k < regions; ++k) {
            const uint g = first_region + 4u * k;
            w[w[g + 3u] + w[g + 1u] + c] = floatBitsToUint(over_rho);
          }
        }
      }
    }
    // K and the norms read vhat: round 1 of pass 1 (core::reduction_rounds).
    if (l == 0u && (w[params + WORD_CAUTIOUS] != 0u || w[params + WORD_BOUND_MODE] == BOUND_TENSOR)) {
      w[params + WORD_WANT_UPDATE_SUMS] = 1u;
    }
    barrier();
  }
}

// Prepare: the constants of the step the counter is at (the host's
// alternatives start at its value when the call was made; the clamp only
// keeps a counter changed under a step in flight inside the table).
void prepare() {
  for (uint j = 0u; j < pc.jobs; ++j) {
    const uint job = pc.jobs_at + JOB_WORDS * j;
    const uint counter = w[job + 5u];
    if (counter == 0u) continue;
    const uint now = uint(uintBitsToFloat(slot[counter - 1u]));
    const uint pick = min(now - w[job + 8u], w[job + 9u] - 1u);
    const uint from = w[job + 10u] + PARAMS_SLOT_WORDS * pick, to = w[job + 4u];
    for (uint i = gl_LocalInvocationID.x; i < PARAMS_WORDS; i += 256u) w[to + i] = w[from + i];
  }
}

void main() {
  if (pc.mode == MODE_PREPARE) {
    prepare();
    return;
  }
  if (pc.mode == MODE_FACTORS) {
    factors();
    return;
  }
  const uint l = gl_LocalInvocationID.x;
  if (l == 0u) {
    refuse = S.failed;
    // GradScaler's found_inf, as the step reads it (-0.0 counts as zero).
    blocked = (pc.found_inf != 0u && uintBitsToFloat(slot[pc.found_inf - 1u]) != 0.0) ? 1u : 0u;
    first_bad = 0u;
  }
  barrier();
  for (uint j = 0u; j < pc.jobs; ++j) {
    const uint job = pc.jobs_at + JOB_WORDS * j;
    combine(job);
    if (l == 0u) {
      const uint params = w[job + 4u];
      const double n = word_double(job + 6u);
      if (w[job + 3u] != 0u && lane_sum[3][0] > 0.0LF && first_bad == 0u) first_bad = w[job + 2u] + 1u;
      double c = 1.0LF;
      if (w[params + WORD_CAUTIOUS] != 0u) {
        const double agree = lane_sum[4][0];
        const double floor_k = 0.001LF * n;
        c = n / (agree > floor_k ? agree : floor_k);
        w[params + WORD_CAUTIOUS_SCALE] = floatBitsToUint(float(c));
      }
      if (w[params + WORD_BOUND_MODE] == BOUND_TENSOR) {
        const double a = c * sqrt(lane_sum[1][0]);
        const double b = sqrt(lane_sum[2][0]);
        const double limit = double(uintBitsToFloat(w[params + WORD_BOUND_RATIO])) * b;
        w[params + WORD_BOUND_SCALE] = floatBitsToUint((b > 0.0LF && a > limit) ? float(limit / a) : 1.0);
      }
    }
    barrier();
  }
  // The order of the CUDA backend's commit: an earlier failure, found_inf,
  // this step's verdict; a step that applies advances its step counters.
  if (l == 0u) {
    uint ok = 0u;
    const bool fails = refuse == 0u && blocked == 0u && first_bad != 0u;
    if (refuse != 0u) {
      S.refused += 1u;
    } else if (blocked != 0u) {
      S.verdict = VERDICT_FOUND_INF;
      S.skipped += 1u;
    } else if (first_bad != 0u) {
      S.verdict = first_bad;
      if (pc.found_inf != 0u) slot[pc.found_inf - 1u] = floatBitsToUint(1.0);
      if (pc.skip_nonfinite != 0u) {
        S.skipped += 1u;
      } else {
        S.failed = first_bad;
      }
    } else {
      S.verdict = 0u;
      ok = 1u;
      for (uint i = 0u; i < pc.increments; ++i) {
        const uint s = w[pc.increments_at + i];
        slot[s] = floatBitsToUint(uintBitsToFloat(slot[s]) + 1.0);
      }
    }
    applied = ok;
    O.applied = ok;
    O.first_bad = fails ? first_bad : 0u;
    O.refused_now = refuse != 0u ? 1u : 0u;
    O.failed_now = (fails && pc.skip_nonfinite == 0u) ? 1u : 0u;
  }
  barrier();
  if (applied == 0u) {
    for (uint i = l; i < 3u * pc.args; i += 256u) w[pc.args_at + i] = 0u;
  }
}
