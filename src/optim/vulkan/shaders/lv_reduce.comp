#version 460
// Pass 1 over one chunk: one tile of WORKGROUP * TILE_ITEMS elements per
// workgroup; each workgroup writes its partial sums (Note [reduction rounds]
// of dispatch/backend.h): the nonfinite count and sum g^2 (want_grad_sums),
// K, sum (lr*u*phi)^2 and sum x^2 (want_update_sums).
#include "lv_common.glsl"
layout(local_size_x = 256) in;

struct TilePartial {
  double grad_sq, update_sq, weight_sq;
  uint nonfinite, agree;
};
layout(std430, set = 0, binding = 7) writeonly buffer Out { TilePartial partials[]; };
shared uint sh_count[2][WORKGROUP];

void main() {
  const uint tile = gl_WorkGroupID.x;
  const uint base = tile * WORKGROUP * TILE_ITEMS + gl_LocalInvocationIndex;
  double grad_sq = 0.0LF, update_sq = 0.0LF, weight_sq = 0.0LF;
  uint nonfinite = 0u, agree = 0u;
  for (uint j = 0u; j < TILE_ITEMS; ++j) {
    const uint i = base + j * WORKGROUP;
    if (i >= pc.n) break;
    const float g = load_grad(i);
    if (P.want_grad_sums != 0u) {
      nonfinite += (floatBitsToUint(g) & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
      grad_sq += double(g) * double(g);
    }
    if (LV_MAY(LV_F_UPDATE_SUMS, P.want_update_sums != 0u)) {
      float v_new;
      const float second = element_second(i, g, v_new);
      const float m = first_moment(exp_avg[pc.m_shift + i], g);
      const float u = raw_update(m, second, g);
      precise float ug = u * g;
      agree += ug > 0.0 ? 1u : 0u;
      precise float d = P.lr * cautious_masked(u, g);
      update_sq += double(d) * double(d);
      const float x = load_weight(i);
      weight_sq += double(x) * double(x);
    }
  }
  nonfinite = subgroupAdd(nonfinite);  // integers: any order gives the same sum
  agree = subgroupAdd(agree);
  const double g_total = workgroup_sum_fixed(grad_sq);
  const double u_total = workgroup_sum_fixed(update_sq);
  const double w_total = workgroup_sum_fixed(weight_sq);
  if (subgroupElect()) {
    sh_count[0][gl_SubgroupID] = nonfinite;
    sh_count[1][gl_SubgroupID] = agree;
  }
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    uint nf = 0u, ag = 0u;
    for (uint s = 0u; s < gl_NumSubgroups; ++s) {
      nf += sh_count[0][s];
      ag += sh_count[1][s];
    }
    partials[tile].grad_sq = g_total;
    partials[tile].update_sq = u_total;
    partials[tile].weight_sq = w_total;
    partials[tile].nonfinite = nf;
    partials[tile].agree = ag;
  }
}
