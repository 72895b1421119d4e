// Kernel argument packing in the AOT Triton ABI (seed 003, section 3.3 C).
#pragma once

#include <span>
#include <vector>

namespace luminav::cuda {

// Note [trailing scratch pointers]: Triton 3.0-3.2 AOT kernels take one
// implicit pointer after the user's arguments (global_scratch); 3.3-3.8 take
// two (global_scratch, profile_scratch). When neither scratch is used the
// pointers must still be there and point to a null device pointer. The
// driver's kernelParams array holds the *address* of each argument, so each
// trailing entry is the address of one shared 0 (a CUdeviceptr).
inline constexpr int kMaxTrailingScratchPtrs = 2;

// The shared null scratch every trailing entry points to.
const unsigned long long* triton_null_scratch();

// `user_arg_ptrs` (addresses of the kernel's declared arguments) followed by
// `num_trailing_scratch_ptrs` addresses of the null scratch. Returns an empty
// vector when the count is outside 0..kMaxTrailingScratchPtrs.
std::vector<void*> pack_triton_abi_args(std::span<void* const> user_arg_ptrs,
                                        int num_trailing_scratch_ptrs);

}  // namespace luminav::cuda
