#version 460
// TD-CLM factored, round 0, after lv_factor_sums.comp: each column's sum of
// g^2, the chunk's row blocks (binding 8) added in block order onto the
// tensor's running total (binding 7, zeroed before the first chunk), so
// that the total is the same sum, in the same order, that the host formed
// when it added the blocks itself; only `cols` doubles go back to the host.
#include "lv_common.glsl"
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 7) buffer Totals { double col_total[]; };
layout(std430, set = 0, binding = 8) readonly buffer Blocks { double col_block[]; };

void main() {
  const uint cols = P.cols;
  const uint blocks = (pc.rows + ROW_BLOCK - 1u) / ROW_BLOCK;
  for (uint c = gl_GlobalInvocationID.x; c < cols; c += gl_NumWorkGroups.x * WORKGROUP) {
    double acc = col_total[c];
    for (uint k = 0u; k < blocks; ++k) acc += col_block[k * cols + c];
    col_total[c] = acc;
  }
}
