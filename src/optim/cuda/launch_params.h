// The one by-value parameter of every LuminaV CUDA kernel, shared by host and device.
#pragma once

#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/reduction_tile.h"
#include "optim/core/step_constants.h"

namespace luminav::cuda {

// Note [tiles and launches]: a launch covers up to kMaxSlots tensors (the
// multi-tensor launch of torch's multi_tensor_apply). Each tensor is cut into
// tiles of kTileElems elements; block b of the grid works on one tile of the
// slot j with first_tile[j] <= b < first_tile[j+1]. Tiles are fixed by the
// tensor alone (not by the grid or the device), so the per-tile reduction
// partials of pass 1, and their combination in tile order, give the same bits
// on every run (Note [deterministic reductions] in kernels.cu).
inline constexpr int kBlockSize = 256;
inline constexpr uint32_t kApplyTileElems = 8192;  // 4 rounds of 2 groups of 4 per thread
// Reductions tile as core says (Note [scratch layout] in core/reduction_tile.h)
// so that a caller's scratch of luminav_scratch_bytes(N) always fits.
inline constexpr uint32_t kReduceTileElems = static_cast<uint32_t>(core::kReductionTile);
inline constexpr uint32_t kTilePartialStride = static_cast<uint32_t>(core::kTilePartialBytes);
inline constexpr int kMaxSlots = 40;        // keeps LaunchParams under the 4 KiB parameter limit

// The kernels' parameter list as manifest.json records it; change the tag
// whenever LaunchParams changes, so that stale artifact directories are refused.
inline constexpr const char* kLaunchAbi = "(const LaunchParams) luminav-cuda-abi-3";

// Which fields of luminav_partials a reduction fills (Note [reduction rounds]).
enum ReduceFields : uint32_t {
  kReduceGrad = 1u,    // nonfinite_count, grad_sq_sum
  kReduceUpdate = 2u,  // agree_count, update_sq_sum, weight_sq_sum
};

struct TensorSlot {
  void* param;
  const void* grad;
  float* exp_avg;
  float* exp_avg_sq;  // CLM: N values; TD-CLM: the scalar s
  float* master;      // nullptr: the parameter is the working weight
  uint64_t num_elements;
  uint64_t index_offset;
  uint64_t seed;
  float second_moment;  // core::TensorGlobals, flattened
  float cautious_scale;
  float bound_scale;
  uint32_t vector_ok;   // 1: every buffer 16-byte aligned (vector path)
};

struct LaunchParams {
  core::StepConstants k;
  uint32_t num_slots;
  uint32_t reduce_fields;
  uint32_t tile_elems;                // kApplyTileElems or kReduceTileElems
  uint32_t reserved;
  unsigned char* tile_partials;       // device: one luminav_partials per tile, kTilePartialStride apart
  luminav_partials* tensor_partials;  // device: one per slot
  float* scalars;                     // device: gather output, one per slot
  uint32_t first_tile[kMaxSlots + 1];
  TensorSlot slots[kMaxSlots];
};
static_assert(sizeof(LaunchParams) <= 4096, "kernel parameters must fit the 4 KiB limit");
static_assert(sizeof(luminav_partials) <= core::kTilePartialBytes, "tile partial layout");

}  // namespace luminav::cuda
