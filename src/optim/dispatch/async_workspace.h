// The caller-owned device workspace of an asynchronous whole step
// (luminav_groups.h): its layout, shared by the driver (which checks the
// size) and the device backends (which carve it up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "optim/core/invariant_divisor.h"
#include "optim/core/reduction_tile.h"
#include "optim/core/second_moment_layout.h"
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

// Note [factors on the device]: TD-CLM row/factored tensors of an
// asynchronous step keep their new factors in the workspace until pass 2:
// the factor kernels write one FactorView per tensor (indexed like the
// globals), and pass 2 reads vhat_i = row[r] (* col_over_rho[c]) from it and
// copies row and col into exp_avg_sq when it writes.
struct FactorView {
  const float* row;           // R new row factors
  const float* col;           // C new column factors (factored), else nullptr
  const float* col_over_rho;  // col_c / rho (factored), else nullptr
  uint64_t rows, cols;
  core::InvariantDivisor by_cols;  // divides by cols when cols < 2^32 (Note [division by an invariant divisor])
};

// One row/factored tensor's arrays in the workspace, 16-byte aligned each.
struct FactorArrays {
  size_t row_sums = 0, row_block_sums = 0, col_sums = 0;  // offsets from its base
  size_t row_new = 0, col_new = 0, col_over_rho = 0;
  size_t bytes = 0;
};

// Note [factor tiles]: the sums of g^2 read the gradient once, in tiles of
// kFactorChunkRows rows by kFactorTileCols columns. A tile gives one partial
// per row (its strip of columns) and one per column (its chunk of rows):
// row partials strip-major (factor_strips(C) x R), column partials
// chunk-major (factor_chunks(R) x C), each added in strip or chunk order
// afterwards, so the bits depend on the shape alone and tall or wide tensors
// both spread over the device. The row factors are then formed in blocks of
// kFactorRowBlock rows, each block's sum of new row factors kept
// (row_block_sums) for rho, added in block order.
inline constexpr uint64_t kFactorChunkRows = 128;
inline constexpr uint64_t kFactorTileCols = 256;
inline constexpr uint64_t kFactorRowBlock = 256;
LUMINAV_HD uint64_t factor_chunks(uint64_t rows) { return (rows + kFactorChunkRows - 1) / kFactorChunkRows; }
LUMINAV_HD uint64_t factor_strips(uint64_t cols) { return (cols + kFactorTileCols - 1) / kFactorTileCols; }
LUMINAV_HD uint64_t factor_row_blocks(uint64_t rows) { return (rows + kFactorRowBlock - 1) / kFactorRowBlock; }

inline FactorArrays factor_arrays(const core::MomentLayout& l) {
  auto align = [](size_t n) { return (n + 15) & ~size_t{15}; };
  FactorArrays a;
  const bool factored = l.kind == core::SecondMoment::kFactored;
  a.row_sums = 0;  // factor_strips(C) x R partials
  a.row_block_sums = align(a.row_sums + factor_strips(l.cols) * l.rows * sizeof(double));
  a.col_sums = align(a.row_block_sums + factor_row_blocks(l.rows) * sizeof(double));  // factor_chunks(R) x C
  a.row_new = align(a.col_sums + (factored ? factor_chunks(l.rows) * l.cols * sizeof(double) : 0));
  a.col_new = align(a.row_new + l.rows * sizeof(float));
  a.col_over_rho = align(a.col_new + (factored ? l.cols * sizeof(float) : 0));
  a.bytes = align(a.col_over_rho + (factored ? l.cols * sizeof(float) : 0));
  return a;
}

// Byte offsets into the workspace, each 256-byte aligned.
struct AsyncWorkspaceLayout {
  size_t words = 0;            // AsyncStepWords
  size_t constants = 0;        // one core::StepConstants per group
  size_t globals = 0;          // one core::TensorGlobals per tensor
  size_t tensor_partials = 0;  // one luminav_partials per tensor (the combined tiles)
  size_t tile_partials = 0;    // core::kTilePartialBytes per reduction tile
  size_t slot_counters = 0;    // one uint32 per tensor: zero between steps (the caller zeroes it once)
  size_t factor_views = 0;     // one FactorView per tensor
  size_t factors = 0;          // the FactorArrays of each TD-CLM row/factored tensor, in call order
  size_t total_bytes = 0;
};

inline AsyncWorkspaceLayout async_workspace_layout(std::span<const AsyncGroup> groups) {
  auto align = [](size_t n) { return (n + 255) & ~size_t{255}; };
  size_t tensors = 0, tiles = 0, factor_bytes = 0;
  for (const AsyncGroup& g : groups) {
    tensors += g.tensors.size();
    for (const luminav_tensor& t : g.tensors) {
      tiles += core::reduction_tiles(t.num_elements);
      const core::MomentLayout m = core::moment_layout(g.k.tdclm, t);
      if (core::has_row_factor(m)) factor_bytes += factor_arrays(m).bytes;
    }
  }
  AsyncWorkspaceLayout l;
  l.words = 0;
  l.constants = align(sizeof(AsyncStepWords));
  l.globals = l.constants + align(groups.size() * sizeof(core::StepConstants));
  l.tensor_partials = l.globals + align(tensors * sizeof(core::TensorGlobals));
  l.tile_partials = l.tensor_partials + align(tensors * sizeof(luminav_partials));
  l.slot_counters = l.tile_partials + align(tiles * core::kTilePartialBytes);
  l.factor_views = l.slot_counters + align(tensors * sizeof(uint32_t));
  l.factors = l.factor_views + align(tensors * sizeof(FactorView));
  l.total_bytes = l.factors + align(factor_bytes);
  return l;
}

}  // namespace luminav::dispatch
