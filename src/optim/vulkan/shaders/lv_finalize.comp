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
// the host formed for the steps the counter can be at. The counters and
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

shared double lane_sum[5][256];  // sum g^2, sum (lr*u*phi)^2, sum x^2, nonfinite, K
shared uint first_bad, refuse, blocked, applied;

double word_double(uint at) { return packDouble2x32(uvec2(w[at], w[at + 1u])); }

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
