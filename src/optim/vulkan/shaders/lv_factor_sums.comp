#version 460
// TD-CLM factored/row, round 0: the sum of g^2 of each row of the chunk
// (binding 7, `rows` doubles) and, factored, of each column over blocks of
// ROW_BLOCK rows (binding 8, one double per (block, column)), both in a
// fixed order (lv_column_totals.comp then adds the blocks in block order).
#include "lv_common.glsl"
layout(local_size_x = 256) in;
// Rows of at least this many columns get a workgroup each; narrower rows a thread.
#define WIDE_ROW 256u

layout(std430, set = 0, binding = 7) writeonly buffer RowOut { double row_sq[]; };
layout(std430, set = 0, binding = 8) writeonly buffer ColOut { double col_sq[]; };

// Dispatch (x, 2): y == 0 the rows, y == 1 the (block, column) pairs, block
// major, spread over the same x workgroups (a workgroup per block and column
// range would leave most of an x sized for the rows empty).
void main() {
  const uint cols = P.cols;
  if (gl_WorkGroupID.y == 0u) {
    if (cols >= WIDE_ROW) {
      for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {  // uniform per workgroup
        double acc = 0.0LF;
        for (uint c = gl_LocalInvocationIndex; c < cols; c += WORKGROUP) {
          const float g = load_grad(r * cols + c);
          acc += double(g) * double(g);
        }
        const double total = workgroup_sum_fixed(acc);
        if (gl_LocalInvocationIndex == 0u) row_sq[r] = total;
      }
    } else {
      for (uint r = gl_GlobalInvocationID.x; r < pc.rows; r += gl_NumWorkGroups.x * WORKGROUP) {
        double acc = 0.0LF;
        for (uint c = 0u; c < cols; ++c) {
          const float g = load_grad(r * cols + c);
          acc += double(g) * double(g);
        }
        row_sq[r] = acc;
      }
    }
    return;
  }
  if (P.kind != KIND_FACTORED) return;
  const uint blocks = (pc.rows + ROW_BLOCK - 1u) / ROW_BLOCK;
  const uint pairs = blocks * cols;  // <= the chunk's elements
  for (uint w = gl_GlobalInvocationID.x; w < pairs; w += gl_NumWorkGroups.x * WORKGROUP) {
    const uint block = w / cols;
    const uint c = w - block * cols;
    const uint r0 = block * ROW_BLOCK;
    const uint r1 = min(r0 + ROW_BLOCK, pc.rows);
    double acc = 0.0LF;
    for (uint r = r0; r < r1; ++r) {
      const float g = load_grad(r * cols + c);
      acc += double(g) * double(g);
    }
    col_sq[w] = acc;
  }
}
