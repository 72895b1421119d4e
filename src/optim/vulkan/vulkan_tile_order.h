// Note [tile combination order]: a tensor's tile partials (lv_reduce.comp,
// one per 4096 elements, its chunks' tiles one after the other) are combined
// into the tensor's sums in one order, by the host after a synchronous pass
// (vulkan_passes.cc) and by the device in the asynchronous step
// (lv_finalize.comp), so that both paths give the same bits: lane l of 256
// adds tiles l, l + 256, l + 512, ... in increasing order from 0.0, then the
// lanes are added pairwise, for s = 128, 64, ..., 1: lane[l] += lane[l + s]
// (l < s), and lane 0 holds the sum. The counts are integers, exact in any
// order (the device adds them in doubles, exact below 2^53).
#pragma once

#include <array>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/vulkan/vulkan_layout.h"

namespace luminav::vulkan {

class TileCombiner {
 public:
  static constexpr uint32_t kLanes = 256;

  void add(const TilePartial& tile) {
    const uint32_t lane = static_cast<uint32_t>(tiles_ % kLanes);
    grad_sq_[lane] += tile.grad_sq;
    update_sq_[lane] += tile.update_sq;
    weight_sq_[lane] += tile.weight_sq;
    nonfinite_ += tile.nonfinite;
    agree_ += tile.agree;
    ++tiles_;
  }

  luminav_partials sums() const {
    luminav_partials out{};
    out.grad_sq_sum = tree(grad_sq_);
    out.update_sq_sum = tree(update_sq_);
    out.weight_sq_sum = tree(weight_sq_);
    out.nonfinite_count = nonfinite_;
    out.agree_count = agree_;
    return out;
  }

 private:
  static double tree(std::array<double, kLanes> lanes) {
    for (uint32_t s = kLanes / 2; s > 0; s >>= 1)
      for (uint32_t l = 0; l < s; ++l) lanes[l] += lanes[l + s];
    return lanes[0];
  }

  std::array<double, kLanes> grad_sq_{}, update_sq_{}, weight_sq_{};
  uint64_t nonfinite_ = 0, agree_ = 0, tiles_ = 0;
};

}  // namespace luminav::vulkan
