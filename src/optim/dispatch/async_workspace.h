// The caller-owned device workspace of an asynchronous whole step
// (luminav_groups.h): its layout, shared by the driver (which checks the
// size) and the device backends (which carve it up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "optim/core/reduction_tile.h"
#include "optim/core/step_constants.h"
#include "optim/dispatch/backend.h"

namespace luminav::dispatch {

// The words the kernels of one step share (reset by the step's first kernel).
struct AsyncStepWords {
  uint32_t first_bad;  // smallest position of a tensor whose check failed, or kNoBadTensor
  uint32_t blocked;    // 1: found_inf set, or an earlier failure not cleared
  uint32_t reserved[2];
};
inline constexpr uint32_t kNoBadTensor = 0xFFFFFFFFu;

// Byte offsets into the workspace, each 256-byte aligned.
struct AsyncWorkspaceLayout {
  size_t words = 0;            // AsyncStepWords
  size_t constants = 0;        // one core::StepConstants per group
  size_t globals = 0;          // one core::TensorGlobals per tensor
  size_t tensor_partials = 0;  // one luminav_partials per tensor (the combined tiles)
  size_t tile_partials = 0;    // core::kTilePartialBytes per reduction tile
  size_t slot_counters = 0;    // one uint32 per tensor: zero between steps (the caller zeroes it once)
  size_t total_bytes = 0;
};

inline AsyncWorkspaceLayout async_workspace_layout(std::span<const AsyncGroup> groups) {
  auto align = [](size_t n) { return (n + 255) & ~size_t{255}; };
  size_t tensors = 0, tiles = 0;
  for (const AsyncGroup& g : groups) {
    tensors += g.tensors.size();
    for (const luminav_tensor& t : g.tensors) tiles += core::reduction_tiles(t.num_elements);
  }
  AsyncWorkspaceLayout l;
  l.words = 0;
  l.constants = align(sizeof(AsyncStepWords));
  l.globals = l.constants + align(groups.size() * sizeof(core::StepConstants));
  l.tensor_partials = l.globals + align(tensors * sizeof(core::TensorGlobals));
  l.tile_partials = l.tensor_partials + align(tensors * sizeof(luminav_partials));
  l.slot_counters = l.tile_partials + align(tiles * core::kTilePartialBytes);
  l.total_bytes = l.slot_counters + align(tensors * sizeof(uint32_t));
  return l;
}

}  // namespace luminav::dispatch
