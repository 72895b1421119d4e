#version 460
// Pass 2 over one chunk: moments, update, bound, decay and write-back.
#include "lv_common.glsl"
layout(local_size_x = 256) in;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WORKGROUP;
  if (i >= pc.n) return;
  const float g = load_grad(i);
  const float x = load_weight(i);
  float v_new;
  const float second = element_second(i, g, v_new);
  const float m = first_moment(exp_avg[pc.m_shift + i], g);
  const float u = raw_update(m, second, g);
  const float x_new = apply_update(x, u, g);
  exp_avg[pc.m_shift + i] = m;
  if (LV_MAY(LV_F_ELEMENTWISE, P.kind == KIND_ELEMENTWISE)) exp_avg_sq[pc.v_shift + i] = v_new;
  if (LV_MAY(LV_F_MASTER, P.has_master != 0u)) master[pc.master_shift + i] = x_new;
  store_param(i, x_new);
}
