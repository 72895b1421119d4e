// The launches of one CLM step from the Triton AOT kernel set (Note [AOT kernel
// set] in build_triton_aot.py): the argument lists of each kernel, packed in the
// order of its manifest signature, written once for the triton-aot backend and
// for the C++ tests that drive the kernels by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "optim/cuda/kernel_manifest.h"
#include "optim/triton/triton_aot.h"

namespace luminav::triton_aot {

// Device addresses of a step's buffers (the list in triton_kernels.py's docstring);
// `unused` is a 16-byte buffer passed for the pointers a variant never reads.
struct ClmStepBuffers {
  uint64_t k = 0, step = 0, hp64 = 0, counter = 0, status = 0, words = 0, gl = 0, partials = 0, unused = 0;
};

// One tensor: fp32 parameter and gradient, or bf16 ones with fp32 masters
// (stochastic rounding), the only pairs the AOT set holds.
struct ClmTensor {
  uint64_t param = 0, grad = 0, exp_avg = 0, exp_avg_sq = 0, master = 0;
  int64_t n = 0, seed = 0, index_offset = 0;
  int64_t position = 0;  // the tensor's position in the step: the finite check's verdict
  bool bf16 = false;
};

// The element math's fp32 scalars (core::StepConstants' names).
struct ClmScalars {
  float beta1 = 0.9f, one_minus_beta1 = 0.1f, beta2 = 0.999f, one_minus_beta2 = 0.001f, eps = 1e-8f;
};

// The kernels the launches below use and the signature each is packed for
// (the pass kernels also as NAME_a16: Note [aligned variants] in build_triton_aot.py).
struct AotKernelAbi {
  std::string_view name;
  std::string_view signature;
};
inline constexpr int kClmKernelCount = 12;
extern const AotKernelAbi kClmKernelSet[kClmKernelCount];

// Every kernel of kClmKernelSet is in `manifest` with exactly that signature,
// the pass kernels say how many elements a program takes; false with `why`
// naming the kernel and what differs (a manifest of another build of the kernels).
bool check_clm_kernel_set(const cuda::KernelManifest& manifest, std::string* why);

// fp64 partials pass 1 writes for a tensor of `n` elements (5 per program).
size_t clm_partials_bytes(const CudaKernels& kernels, int64_t n);

// Each returns false with `why` (the driver's error) when a launch fails.
// The step's constants and words from hp64 and the fp32 step counter (device side).
bool launch_prepare(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                    std::string* why);
// Pass 1 of one tensor: the finite check into the words (smallest failing position wins).
bool launch_finite_check(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t,
                         const ClmScalars& s, cuda::drv::CUstream stream, std::string* why);
// Pass 2 of one tensor (writes nothing when the words hold a failure).
bool launch_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t, const ClmScalars& s,
                  cuda::drv::CUstream stream, std::string* why);
// The verdict into the status word, then the step counter.
bool launch_commit(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                   std::string* why);

}  // namespace luminav::triton_aot
