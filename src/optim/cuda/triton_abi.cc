// Appends Triton's implicit trailing scratch pointers to a kernel's arguments.
#include "optim/cuda/triton_abi.h"

namespace luminav::cuda {

const unsigned long long* triton_null_scratch() {
  static const unsigned long long kNullScratch = 0;
  return &kNullScratch;
}

std::vector<void*> pack_triton_abi_args(std::span<void* const> user_arg_ptrs,
                                        int num_trailing_scratch_ptrs) {
  if (num_trailing_scratch_ptrs < 0 || num_trailing_scratch_ptrs > kMaxTrailingScratchPtrs) return {};
  std::vector<void*> packed(user_arg_ptrs.begin(), user_arg_ptrs.end());
  // The driver only reads through these addresses (it copies the argument
  // values at launch), so handing out the shared constant is safe.
  void* null_scratch = const_cast<unsigned long long*>(triton_null_scratch());
  packed.insert(packed.end(), static_cast<size_t>(num_trailing_scratch_ptrs), null_scratch);
  return packed;
}

}  // namespace luminav::cuda
