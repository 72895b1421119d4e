// The tiling of pass-1 reductions and the scratch size it implies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "optim/core/host_device.h"

namespace luminav::core {

// Note [scratch layout]: a backend that reduces in parallel (CUDA, Vulkan)
// writes one partial per tile of kReductionTile elements into the scratch
// buffer; a partial takes kTilePartialBytes (the five luminav_partials fields
// padded to 64 bytes). A step over N elements therefore needs
// max(1, ceil(N / kReductionTile)) * kTilePartialBytes bytes, and a
// multi-tensor step the sum of that over its tensors. CPU backends need none
// but the rule is the same everywhere so that a caller's size always fits.
inline constexpr size_t kReductionTile = 65536;
inline constexpr size_t kTilePartialBytes = 64;

LUMINAV_HD size_t reduction_tiles(size_t num_elements) {
  const size_t tiles = num_elements / kReductionTile + (num_elements % kReductionTile != 0);
  return tiles == 0 ? 1 : tiles;
}

LUMINAV_HD size_t scratch_bytes_for(size_t num_elements) {
  return reduction_tiles(num_elements) * kTilePartialBytes;
}

}  // namespace luminav::core
