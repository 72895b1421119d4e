// Many tensors per launch in triton-aot's steps (Note [AOT tensor tables] in
// build_triton_aot.py): which tensors of a step go together, the tables and program maps their
// multi-tensor kernels read (Note [tensor tables] and Note [factored tables] in triton_kernels.py),
// and the launches, packed in the order of each kernel's manifest signature.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optim/triton/triton_aot_tdclm_step.h"

namespace luminav::triton_aot {

// One tensor of a step as the backend plans it: CLM's per-element moments (tdclm false; a TD-CLM
// tensor with C = 1 too), or TD-CLM's tensor, row or factored form, in group `group`.
struct StepTensor {
  bool tdclm = false;
  TdclmTensor t;
  ClmScalars s;
  size_t group = 0;
};

// Tensors of one group stepped by one launch per stage: CLM ones of one dtype pair (the finite check,
// pass 2), or factored TD-CLM ones of one dtype pair and sums tile (sums, row factors, column factors,
// pass 2). Its tables and program maps lie in the step's tables buffer at the byte offsets below.
struct TensorBatch {
  bool factored = false;
  size_t group = 0;
  std::vector<size_t> members;  // indices of the step's tensors, in step order
  bool fixed_aligned = false;   // every N (factored: and C) and every address but the gradients' a multiple of 16
  size_t first_gradient = 0;    // its members' gradient addresses from this entry of the gradient table
  // CLM: [0] the finite check's table and map (REDUCE_BLOCK programs), [1] pass 2's (APPLY_BLOCK);
  // factored: one table, and the map of each stage (sums, rows, cols, apply).
  size_t tables[2] = {};
  size_t maps[4] = {};
  unsigned programs[4] = {};
};

struct BatchPlan {
  std::vector<TensorBatch> batches;
  std::vector<char> in_batch;          // per tensor of the step: 1 when a batch steps it
  std::vector<size_t> scratch_offset;  // per tensor: its factor sums' scratch in the batch scratch (factored)
  size_t table_bytes = 0;              // tables and program maps
  size_t scratch_bytes = 0;            // the factored members' row and column partials and block sums
  size_t gradients = 0;                // entries of the gradient table
};

// The batches of a step: tensors with at least one element, grouped by (group, CLM or factored,
// dtype pair, sums tile); a class of one tensor keeps that tensor's own launches, as do TD-CLM's
// tensor and row forms.
BatchPlan plan_batches(std::span<const StepTensor> tensors);

// What plan_batches and batch_tables read of `tensors`, but their regions (t.gl, t.factors) and
// gradients: equal keys give equal plans, and equal tables where the regions and scratch are the same.
std::vector<uint64_t> batch_key(std::span<const StepTensor> tensors);

// The tables buffer's contents (plan.table_bytes) for `tensors` with the batch scratch at `scratch`
// (a device address): what stays put while the same tensors are stepped.
std::vector<uint8_t> batch_tables(const BatchPlan& plan, std::span<const StepTensor> tensors, uint64_t scratch);
// The gradient table (plan.gradients int64): each batch's members' gradient addresses.
std::vector<uint64_t> batch_gradients(const BatchPlan& plan, std::span<const StepTensor> tensors);

// Device addresses of the buffers above.
struct BatchBuffers {
  uint64_t tables = 0, gradients = 0;
};

// A batch's pass 1 (the finite check; factored: the sums, verdict included, and the new factors) and
// its pass 2, as launch_finite_check / launch_tdclm_round0 and launch_apply / launch_tdclm_apply do
// for each member. False with `why` when a launch fails.
bool launch_batch_round0(const CudaKernels& kernels, const ClmStepBuffers& b, const BatchBuffers& buffers,
                         const TensorBatch& batch, std::span<const StepTensor> tensors, cuda::drv::CUstream stream,
                         std::string* why);
bool launch_batch_apply(const CudaKernels& kernels, const ClmStepBuffers& b, const BatchBuffers& buffers,
                        const TensorBatch& batch, std::span<const StepTensor> tensors, cuda::drv::CUstream stream,
                        std::string* why);

// The kernels a batch's launches take (tests and error messages): pass 1's first and pass 2's.
std::string batch_round0_kernel(const TensorBatch& batch, std::span<const StepTensor> tensors);
std::string batch_apply_kernel(const TensorBatch& batch, std::span<const StepTensor> tensors);

inline constexpr int kBatchKernelCount = 22;
extern const AotKernelAbi kBatchKernelSet[kBatchKernelCount];
// check_kernel_set for kBatchKernelSet, and each kernel covering the elements per program the maps assume.
bool check_batch_kernel_set(const cuda::KernelManifest& manifest, std::string* why);

}  // namespace luminav::triton_aot
