// The launches of one CLM step from the Triton AOT kernel set (Note [AOT kernel
// set] in build_triton_aot.py): the argument lists of each kernel, packed in the
// order of its manifest signature, written once for the triton-aot backend and
// for the C++ tests that drive the kernels by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
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

// Values the variants of the AOT set fix (no lam, no soft clip, no bound, CLM element moments): the
// addresses of these are packed for the kernels' arguments of those names.
struct FixedScalars {
  float lam = 0.0f, one_minus_lam = 1.0f, tau = 0.0f, bound_ratio = 0.0f;
  int64_t one = 1, zero = 0;
};

// ceil(a / b) for a >= 0, b > 0 (program counts).
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The kernels the launches below use and the signature each is packed for
// (the pass kernels also as NAME_a16: Note [aligned variants] in build_triton_aot.py).
struct AotKernelAbi {
  std::string_view name;
  std::string_view signature;
};
inline constexpr int kClmKernelCount = 12;
extern const AotKernelAbi kClmKernelSet[kClmKernelCount];

// The argument lists of the kernels the CLM and TD-CLM sets share (finalize_kernel and
// apply_kernel of triton_kernels.py, whatever their constexprs), after the apply's p_ptr and g_ptr.
#define LUMINAV_TRITON_FINALIZE_SIG                                                                          \
  "(partials_ptr:*fp64, num_partials:i64, gl_ptr:*fp32, words_ptr:*i32, k_ptr:*fp32, exp_avg_sq_ptr:*fp32, " \
  "row_sums_ptr:*fp64, col_sums_ptr:*fp64, new_ptr:*fp32, n:i64, rows:i64, cols:i64, chunks:i64, "           \
  "position:i64, beta2:fp32, one_minus_beta2:fp32, bound_ratio:fp32)"
#define LUMINAV_TRITON_APPLY_SIG                                                                            \
  "m_ptr:*fp32, v_ptr:*fp32, master_ptr:*fp32, k_ptr:*fp32, step_ptr:*i64, words_ptr:*i32, gl_ptr:*fp32, "  \
  "new_ptr:*fp32, n:i64, rows:i64, cols:i64, seed:i64, index_offset:i64, beta1:fp32, one_minus_beta1:fp32, " \
  "beta2:fp32, one_minus_beta2:fp32, eps:fp32, lam:fp32, one_minus_lam:fp32, tau:fp32, bound_ratio:fp32)"

// Every kernel of `set` is in `manifest` with exactly that signature, the pass
// kernels say how many elements a program takes; false with `why` naming the
// kernel and what differs (a manifest of another build of the kernels).
bool check_kernel_set(const cuda::KernelManifest& manifest, std::span<const AotKernelAbi> set, std::string* why);
bool check_clm_kernel_set(const cuda::KernelManifest& manifest, std::string* why);

// Note [aligned variants]: a tensor whose addresses are all multiples of 16 bytes and whose N is a
// multiple of 16.
bool aligned16(const ClmTensor& t);
// Programs of `name` for `n` elements (its manifest's elements_per_program; 1 when it does not say).
unsigned programs_of(const CudaKernels& kernels, std::string_view name, int64_t n);

// fp64 partials pass 1 writes for a tensor of `n` elements (5 per program).
size_t clm_partials_bytes(const CudaKernels& kernels, int64_t n);

// Each returns false with `why` (the driver's error) when a launch fails.
// The step's constants and words from hp64 and the fp32 step counter (device side).
bool launch_prepare(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                    std::string* why);
// Pass 1 of one tensor: the finite check into the words (smallest failing position wins).
bool launch_finite_check(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t,
                         const ClmScalars& s, cuda::drv::CUstream stream, std::string* why);
// Pass 1's gradient sums of one tensor alone (nonfinite count and sum g^2 per program into
// b.partials, field-major); *num_partials: the programs launched.
bool launch_grad_sums(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t, const ClmScalars& s,
                      cuda::drv::CUstream stream, int64_t* num_partials, std::string* why);
// Pass 2 of one tensor (writes nothing when the words hold a failure).
bool launch_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t, const ClmScalars& s,
                  cuda::drv::CUstream stream, std::string* why);
// The second moment pass 2 reads besides the tensor's own buffers: `gl` (fp32[4], the tensor's
// globals), `factors` (TD-CLM's new row, col and col/rho) and R, C (CLM: b.gl, none, N, 1).
struct ApplyMoments {
  uint64_t gl = 0, factors = 0;
  int64_t rows = 0, cols = 1;
};
// Pass 2 through the named apply kernel (any form of apply_kernel: they share LUMINAV_TRITON_APPLY_SIG).
bool launch_apply_kernel(const CudaKernels& kernels, std::string_view name, const ClmStepBuffers& b,
                         const ClmTensor& t, const ClmScalars& s, const ApplyMoments& moments,
                         cuda::drv::CUstream stream, std::string* why);
// The verdict of the step (its words) into the status word.
bool launch_commit(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                   std::string* why);
// b.counter + 1 where the status word's verdict says the step was applied (after launch_commit).
bool launch_advance(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                    std::string* why);

}  // namespace luminav::triton_aot
