#version 460
// The benchmark's bandwidth anchor (vulkan_bench.cc): fp32 grad -> exp_avg,
// one element per invocation as in the apply pass, so that the step's bytes
// compare with what the shader cores move on this device (vkCmdCopyBuffer may
// run on a copy engine instead).
layout(local_size_x = 256) in;
layout(push_constant) uniform Chunk { uint n; } pc;
layout(std430, set = 0, binding = 2) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Dst { float dst[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i < pc.n) dst[i] = src[i];
}
