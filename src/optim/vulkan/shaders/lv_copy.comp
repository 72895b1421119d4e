#version 460
// fp32 binding 2 -> binding 3, one element per invocation as in the apply
// pass, from grad_shift / to m_shift (ChunkPush's fields of those bindings).
// The benchmark's bandwidth anchor (vulkan_bench.cc, shifts 0: the step's
// bytes compare with what the shader cores move on this device, where
// vkCmdCopyBuffer may run on a copy engine), and the asynchronous TD-CLM
// step's store of its new factors into exp_avg_sq (vulkan_async.cc: an
// indirect dispatch that lv_finalize.comp empties when the step must not write).
layout(local_size_x = 256) in;
layout(push_constant) uniform Chunk { uint n, param_shift, src_shift, dst_shift; } pc;
layout(std430, set = 0, binding = 2) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Dst { float dst[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i < pc.n) dst[pc.dst_shift + i] = src[pc.src_shift + i];
}
