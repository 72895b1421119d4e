// Argument packing of the Triton AOT CLM kernels (signatures of build_triton_aot.py).
#include "optim/triton/triton_aot_clm_step.h"

namespace luminav::triton_aot {
namespace {

constexpr std::string_view kPrepare = "luminav_triton_prepare";
constexpr std::string_view kReduceF32 = "luminav_triton_reduce_gf32";
constexpr std::string_view kReduceBf16 = "luminav_triton_reduce_gbf16";
constexpr std::string_view kFinalize = "luminav_triton_finalize";
constexpr std::string_view kApplyF32 = "luminav_triton_apply_pf32_gf32";
constexpr std::string_view kApplyBf16 = "luminav_triton_apply_pbf16_gbf16";
constexpr std::string_view kReduceF32A16 = "luminav_triton_reduce_gf32_a16";
constexpr std::string_view kApplyF32A16 = "luminav_triton_apply_pf32_gf32_a16";
constexpr std::string_view kReduceBf16A16 = "luminav_triton_reduce_gbf16_a16";
constexpr std::string_view kApplyBf16A16 = "luminav_triton_apply_pbf16_gbf16_a16";
constexpr std::string_view kCommit = "luminav_triton_commit";
constexpr std::string_view kAdvance = "luminav_triton_advance";
constexpr int kPartialFields = 5;  // triton_kernels.PARTIAL_FIELDS

}  // namespace

unsigned programs_of(const CudaKernels& kernels, std::string_view name, int64_t n) {
  const LoadedKernel* k = kernels.find(name);
  const uint64_t per = k != nullptr && k->entry.elements_per_program > 0 ? k->entry.elements_per_program : 1;
  return static_cast<unsigned>((static_cast<uint64_t>(n) + per - 1) / per);
}

bool aligned16(const ClmTensor& t) {
  const uint64_t any = t.param | t.grad | t.exp_avg | t.exp_avg_sq | t.master;
  return (any % 16) == 0 && (t.n % 16) == 0;
}

#define LUMINAV_REDUCE_SIG                                                                                     \
  "m_ptr:*fp32, v_ptr:*fp32, x_ptr:*fp32, partials_ptr:*fp64, k_ptr:*fp32, words_ptr:*i32, gl_ptr:*fp32, "    \
  "row_ptr:*fp32, col_over_rho_ptr:*fp32, n:i64, cols:i64, position:i64, beta1:fp32, one_minus_beta1:fp32, " \
  "beta2:fp32, one_minus_beta2:fp32, eps:fp32, lam:fp32, one_minus_lam:fp32, tau:fp32)"
#define LUMINAV_APPLY_SIG LUMINAV_TRITON_APPLY_SIG

const AotKernelAbi kClmKernelSet[kClmKernelCount] = {
    {kPrepare,
     "(k_ptr:*fp32, step_out_ptr:*i64, hp64_ptr:*fp64, counter_ptr:*fp32, lr_ptr:*fp32, grad_scale_ptr:*fp32, "
     "found_inf_ptr:*fp32, status_ptr:*i32, words_ptr:*i32)"},
    {kReduceF32, "(g_ptr:*fp32, " LUMINAV_REDUCE_SIG},
    {kReduceBf16, "(g_ptr:*i16, " LUMINAV_REDUCE_SIG},
    {kFinalize, LUMINAV_TRITON_FINALIZE_SIG},
    {kApplyF32, "(p_ptr:*fp32, g_ptr:*fp32, " LUMINAV_APPLY_SIG},
    {kApplyBf16, "(p_ptr:*i16, g_ptr:*i16, " LUMINAV_APPLY_SIG},
    // Note [aligned variants] (build_triton_aot.py): the same kernels with 16-byte hints.
    {kReduceF32A16, "(g_ptr:*fp32, " LUMINAV_REDUCE_SIG},
    {kApplyF32A16, "(p_ptr:*fp32, g_ptr:*fp32, " LUMINAV_APPLY_SIG},
    {kReduceBf16A16, "(g_ptr:*i16, " LUMINAV_REDUCE_SIG},
    {kApplyBf16A16, "(p_ptr:*i16, g_ptr:*i16, " LUMINAV_APPLY_SIG},
    {kCommit, "(status_ptr:*i32, words_ptr:*i32, found_inf_ptr:*fp32)"},
    {kAdvance, "(status_ptr:*i32, counter_ptr:*fp32)"},
};
#undef LUMINAV_REDUCE_SIG
#undef LUMINAV_APPLY_SIG

bool check_clm_kernel_set(const cuda::KernelManifest& manifest, std::string* why) {
  return check_kernel_set(manifest, kClmKernelSet, why);
}

bool check_kernel_set(const cuda::KernelManifest& manifest, std::span<const AotKernelAbi> set, std::string* why) {
  for (const AotKernelAbi& abi : set) {
    const cuda::KernelEntry* k = manifest.find_kernel(abi.name);
    if (k == nullptr) {
      *why = "manifest: kernel " + std::string(abi.name) + " is missing (built with LUMINA_TRITON_AOT_KERNELS=all?)";
      return false;
    }
    if (k->signature != abi.signature) {
      *why = "manifest: kernel " + k->name + " has signature \"" + k->signature + "\", this library packs \"" +
             std::string(abi.signature) + "\" (kernels from another build?)";
      return false;
    }
    const bool per_element = abi.name.find("reduce") != std::string_view::npos ||
                             abi.name.find("apply") != std::string_view::npos ||
                             abi.name.find("_sums_") != std::string_view::npos;
    if (per_element && k->elements_per_program == 0) {
      *why = "manifest: kernel " + k->name + " does not say its elements_per_program";
      return false;
    }
  }
  return true;
}

size_t clm_partials_bytes(const CudaKernels& kernels, int64_t n) {
  return static_cast<size_t>(programs_of(kernels, kReduceF32, n)) * kPartialFields * sizeof(double);
}

bool launch_prepare(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                    std::string* why) {
  ClmStepBuffers v = b;
  void* args[] = {&v.k, &v.step, &v.hp64, &v.counter, &v.unused, &v.unused, &v.unused, &v.status, &v.words};
  return kernels.launch(kPrepare, 1, args, stream, why);
}

bool launch_grad_sums(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t, const ClmScalars& s,
                      cuda::drv::CUstream stream, int64_t* num_partials, std::string* why) {
  ClmStepBuffers v = b;
  ClmTensor x = t;
  ClmScalars c = s;
  FixedScalars f;
  const std::string_view reduce = aligned16(t) ? (t.bf16 ? kReduceBf16A16 : kReduceF32A16)
                                               : (t.bf16 ? kReduceBf16 : kReduceF32);
  const unsigned grid = programs_of(kernels, reduce, t.n);
  *num_partials = grid;
  // The reduce variant reads only the gradient; the others are placeholders of its signature.
  void* reduce_args[] = {&x.grad, &x.exp_avg, &x.exp_avg_sq, &x.param, &v.partials, &v.k, &v.words, &v.gl,
                         &v.unused, &v.unused, &x.n, &f.one, &x.position, &c.beta1, &c.one_minus_beta1,
                         &c.beta2, &c.one_minus_beta2, &c.eps, &f.lam, &f.one_minus_lam, &f.tau};
  return kernels.launch(reduce, grid, reduce_args, stream, why);
}

bool launch_finite_check(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t,
                         const ClmScalars& s, cuda::drv::CUstream stream, std::string* why) {
  ClmStepBuffers v = b;
  ClmTensor x = t;
  ClmScalars c = s;
  FixedScalars f;
  int64_t num_partials = 0;
  void* finalize_args[] = {&v.partials, &num_partials, &v.gl, &v.words, &v.k, &x.exp_avg_sq, &v.unused,
                           &v.unused, &v.unused, &x.n, &x.n, &f.one, &f.one, &x.position, &c.beta2,
                           &c.one_minus_beta2, &f.bound_ratio};
  return launch_grad_sums(kernels, b, t, s, stream, &num_partials, why) &&
         kernels.launch(kFinalize, 1, finalize_args, stream, why);
}

bool launch_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const ClmTensor& t, const ClmScalars& s,
                  cuda::drv::CUstream stream, std::string* why) {
  const std::string_view apply = aligned16(t) ? (t.bf16 ? kApplyBf16A16 : kApplyF32A16)
                                              : (t.bf16 ? kApplyBf16 : kApplyF32);
  return launch_apply_kernel(kernels, apply, b, t, s, ApplyMoments{b.gl, b.unused, t.n, 1}, stream, why);
}

bool launch_apply_kernel(const CudaKernels& kernels, std::string_view name, const ClmStepBuffers& b,
                         const ClmTensor& t, const ClmScalars& s, const ApplyMoments& moments,
                         cuda::drv::CUstream stream, std::string* why) {
  ClmStepBuffers v = b;
  ClmTensor x = t;
  ClmScalars c = s;
  ApplyMoments o = moments;
  FixedScalars f;
  if (x.master == 0) x.master = x.param;  // the fp32 variants read no master
  void* args[] = {&x.param, &x.grad, &x.exp_avg, &x.exp_avg_sq, &x.master, &v.k, &v.step, &v.words, &o.gl,
                  &o.factors, &x.n, &o.rows, &o.cols, &x.seed, &x.index_offset, &c.beta1, &c.one_minus_beta1,
                  &c.beta2, &c.one_minus_beta2, &c.eps, &f.lam, &f.one_minus_lam, &f.tau, &f.bound_ratio};
  return kernels.launch(name, programs_of(kernels, name, t.n), args, stream, why);
}

bool launch_commit(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                   std::string* why) {
  ClmStepBuffers v = b;
  void* commit[] = {&v.status, &v.words, &v.unused};
  return kernels.launch(kCommit, 1, commit, stream, why);
}

bool launch_advance(const CudaKernels& kernels, const ClmStepBuffers& b, cuda::drv::CUstream stream,
                    std::string* why) {
  ClmStepBuffers v = b;
  void* advance[] = {&v.status, &v.counter};
  return kernels.launch(kAdvance, 1, advance, stream, why);
}

}  // namespace luminav::triton_aot
