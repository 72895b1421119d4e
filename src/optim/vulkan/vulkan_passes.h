// One pass of the step (pass 1's reductions or pass 2) over a set of
// tensors on the Vulkan device: chunked to the storage-buffer range, host
// arrays imported in place (VK_EXT_external_memory_host) or staged.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "luminav/luminav.h"
#include "optim/core/second_moment_layout.h"
#include "optim/vulkan/vulkan_context.h"
#include "optim/vulkan/vulkan_layout.h"

namespace luminav::vulkan {

// Where one array lives: host memory (imported or staged), or a device
// buffer with element 0 at `offset` (the benchmark's device-local arrays).
struct Source {
  void* host = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  bool present() const { return host != nullptr || buffer != VK_NULL_HANDLE; }
};

enum class Pass { kReduce, kApply };

// One tensor of a pass.
struct TensorJob {
  size_t num_elements = 0;
  uint64_t index_offset = 0;
  int param_dtype = LUMINAV_DTYPE_F32, grad_dtype = LUMINAV_DTYPE_F32;
  core::MomentLayout layout;
  Source param, grad, exp_avg, exp_avg_sq, master;  // exp_avg_sq: per-element v only
  StepParams params{};
  // kReduce results: the partials; row layouts (round 0 with want_grad_sums):
  // the sums of g^2 of each row (layout.rows) and, factored, each column (cols).
  luminav_partials partials{};
  double* row_sq = nullptr;
  double* col_sq = nullptr;
  // Row layouts with update sums or kApply: the updated row factor (rows)
  // and, factored, col_c / rho (cols), host arrays.
  const float* row_factor = nullptr;
  const float* col_over_rho = nullptr;
};

// How the pass went, for the benchmark.
struct PassStats {
  size_t chunks = 0;
  size_t imported = 0;   // arrays read in place
  size_t staged = 0;     // arrays copied through staging buffers
  size_t staged_bytes = 0;
};

// Runs `pass` over every job (one submission); LUMINAV_STATUS_* with `why`
// on failure. Nothing of a host array is written unless every chunk's
// memory was obtained first.
int run_pass(Context& context, Pass pass, std::span<TensorJob> jobs, std::string* why,
             PassStats* stats = nullptr);

// A descriptor set of the context's layout allocated from `pool`, binding b
// pointed at ranges[b] (LUMINAV_STATUS_* with `why` on failure).
int make_descriptor_set(Context& context, VkDescriptorPool pool, const VkDescriptorBufferInfo (&ranges)[kBindingCount],
                        VkDescriptorSet* out, std::string* why);

// Elements per chunk for a tensor of this layout and these dtypes (every
// array of a chunk fits one descriptor range); 0 when one row is too long.
size_t chunk_elements(const Context& context, const core::MomentLayout& layout);

}  // namespace luminav::vulkan
