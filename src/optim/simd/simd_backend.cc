// The simd backend: Highway kernels (step_kernels.cc) over a static partition
// of every tensor of a call, on the oneTBB arena (parallel_pieces.cc).
//
// Note [deterministic reductions]: pass 1 cuts each tensor into tiles of
// core::kReductionTile (65,536) elements and each tile is summed by one
// kernel call in a fixed order. Tiles group into chunks of kChunkElements
// (2,097,152 = 32 tiles): a tensor's partial is the in-order sum of its chunk
// partials, each the in-order sum of its tile partials. Which thread computes
// a tile never enters the result, so 1, 2 or 7 threads give the same bits.
// Pass 2 has no sums and splits anywhere (at multiples of 64 elements).
// Note [reverse pass 1]: each thread walks its share of pass 1 from the last
// tile to the first, and pass 2 (which follows the same shares, split at the
// same element positions up to alignment) from the first to the last, so
// pass 2 starts on the gradient lines pass 1 touched most recently: as much
// of the second gradient read as the cache holds comes from the cache
// rather than from memory. The order of computation never enters the sums.
// Note [multi-tensor step]: the tensors of one call form one work list (tiles
// for pass 1, the concatenated element range for pass 2), split into equal
// element shares, one parallel loop for the whole call: a thousand small
// tensors cost one wake-up, not a thousand.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "optim/core/reduction_tile.h"
#include "optim/dispatch/backend.h"
#include "optim/dispatch/backend_error.h"
#include "optim/dispatch/backend_factories.h"
#include "optim/simd/highway_target.h"
#include "optim/simd/parallel_pieces.h"
#include "optim/simd/step_kernels.h"

namespace luminav {
namespace {

using core::StepConstants;
using core::TensorGlobals;

constexpr size_t kTileElements = core::kReductionTile;
constexpr size_t kChunkElements = size_t{1} << 21;
constexpr size_t kTilesPerChunk = kChunkElements / kTileElements;
static_assert(kChunkElements % kTileElements == 0);
// A thread is worth waking for this many elements of pass 2 (~0.4 MB of
// fp32 CLM traffic, well above the ~10 us a TBB wake-up costs).
constexpr size_t kMinPieceElements = 16384;
// Pass-2 split points are multiples of this (whole vectors on every target).
constexpr size_t kSplitAlignment = 64;

struct Tile {
  size_t tensor;
  size_t begin, end;
  size_t first_element;  // position of `begin` in the call's concatenated elements
};

// One partial per tile, padded to a cache line so threads never share one.
struct alignas(64) TilePartial {
  luminav_partials sums;
};

// Adds b into a (the combination order is the caller's).
void accumulate(luminav_partials& a, const luminav_partials& b) {
  a.nonfinite_count += b.nonfinite_count;
  a.agree_count += b.agree_count;
  a.grad_sq_sum += b.grad_sq_sum;
  a.update_sq_sum += b.update_sq_sum;
  a.weight_sq_sum += b.weight_sq_sum;
}

// Piece p of `pieces` gets the work items whose first element lies in
// [p * total / pieces, (p + 1) * total / pieces): equal shares of elements.
size_t share_start(size_t total, int pieces, int p) {
  return static_cast<size_t>((static_cast<unsigned __int128>(total) * p) / pieces);
}

int piece_count(size_t work_items, size_t total_elements, size_t min_elements) {
  const size_t by_size = std::max<size_t>(1, total_elements / min_elements);
  const size_t pieces = std::min({static_cast<size_t>(simd::worker_threads()), work_items, by_size});
  return static_cast<int>(std::max<size_t>(pieces, 1));
}

int report(int status, std::string message) {
  set_backend_error(std::move(message));
  return status;
}

class SimdBackend final : public Backend {
 public:
  std::string_view name() const override { return "simd"; }

  bool available(std::string* why_not) const override {
    std::string reason;
    const bool ok = simd::apply_target_override(&reason);
    if (why_not) *why_not = reason;
    return ok;
  }

  std::string detail() const override { return simd::current_target_name(); }

  int device_type() const override { return LUMINAV_DEVICE_CPU; }

  int reduce(const StepConstants& k, std::span<const luminav_tensor> tensors, int round,
             std::span<const TensorGlobals> globals, std::span<luminav_partials> out,
             const ExecContext&) override {
    try {
      reduce_all(k, tensors, round, globals, out);
      return LUMINAV_STATUS_OK;
    } catch (const std::bad_alloc&) {
      return report(LUMINAV_STATUS_OUT_OF_MEMORY, "simd reduce: out of memory");
    } catch (const std::exception& e) {
      return report(LUMINAV_STATUS_INTERNAL, std::string("simd reduce: ") + e.what());
    }
  }

  int apply(const StepConstants& k, std::span<const luminav_tensor> tensors,
            std::span<const TensorGlobals> globals, const ExecContext&) override {
    try {
      apply_all(k, tensors, globals);
      return LUMINAV_STATUS_OK;
    } catch (const std::bad_alloc&) {
      return report(LUMINAV_STATUS_OUT_OF_MEMORY, "simd apply: out of memory");
    } catch (const std::exception& e) {
      return report(LUMINAV_STATUS_INTERNAL, std::string("simd apply: ") + e.what());
    }
  }

 private:
  static void reduce_all(const StepConstants& k, std::span<const luminav_tensor> tensors,
                         int round, std::span<const TensorGlobals> globals,
                         std::span<luminav_partials> out) {
    // Reused across calls of this thread: no allocation per step. (Named
    // through references: a lambda running on a worker thread would
    // otherwise see that worker's own thread_local copies.)
    thread_local std::vector<Tile> tiles_of_thread;
    thread_local std::vector<TilePartial> partials_of_thread;
    std::vector<Tile>& tiles = tiles_of_thread;
    std::vector<TilePartial>& partials = partials_of_thread;
    tiles.clear();
    size_t total = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const size_t n = tensors[t].num_elements;
      for (size_t begin = 0; begin < n; begin += kTileElements) {
        const size_t end = std::min(n, begin + kTileElements);
        tiles.push_back(Tile{t, begin, end, total});
        total += end - begin;
      }
    }
    partials.resize(tiles.size());
    const int pieces = piece_count(tiles.size(), total, kTileElements);
    simd::run_pieces(pieces, [&](int p) {
      const size_t lo = share_start(total, pieces, p);
      const size_t hi = share_start(total, pieces, p + 1);
      const auto by_start = [](const Tile& a, size_t e) { return a.first_element < e; };
      const auto first = std::lower_bound(tiles.begin(), tiles.end(), lo, by_start);
      const auto last = std::lower_bound(first, tiles.end(), hi, by_start);
      // Last tile first (Note [reverse pass 1]).
      for (auto it = last; it != first;) {
        --it;
        simd::reduce_range(k, globals[it->tensor], tensors[it->tensor], round, it->begin, it->end,
                           partials[static_cast<size_t>(it - tiles.begin())].sums);
      }
    });
    // Fixed combination order (Note [deterministic reductions]).
    for (size_t t = 0; t < tensors.size(); ++t) out[t] = luminav_partials{};
    size_t i = 0;
    while (i < tiles.size()) {
      const size_t t = tiles[i].tensor;
      luminav_partials chunk{};
      for (size_t in_chunk = 0; in_chunk < kTilesPerChunk && i < tiles.size() && tiles[i].tensor == t;
           ++in_chunk, ++i) {
        accumulate(chunk, partials[i].sums);
      }
      accumulate(out[t], chunk);
    }
  }

  static void apply_all(const StepConstants& k, std::span<const luminav_tensor> tensors,
                        std::span<const TensorGlobals> globals) {
    thread_local std::vector<size_t> starts_of_thread;
    std::vector<size_t>& starts = starts_of_thread;  // first element of each tensor in the call
    starts.resize(tensors.size() + 1);
    size_t total = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      starts[t] = total;
      total += tensors[t].num_elements;
    }
    starts[tensors.size()] = total;
    const int pieces = piece_count(total, total, kMinPieceElements);
    simd::run_pieces(pieces, [&](int p) {
      const auto aligned = [&](int q) {
        return q == pieces ? total : share_start(total, pieces, q) / kSplitAlignment * kSplitAlignment;
      };
      const size_t lo = aligned(p);
      const size_t hi = aligned(p + 1);
      if (lo >= hi) return;
      // Last tensor starting at or before lo.
      size_t t = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end() - 1, lo) -
                                     starts.begin()) - 1;
      for (; t < tensors.size() && starts[t] < hi; ++t) {
        const size_t begin = std::max(lo, starts[t]) - starts[t];
        const size_t end = std::min(hi, starts[t + 1]) - starts[t];
        if (begin < end) simd::apply_range(k, globals[t], tensors[t], begin, end);
      }
    });
    if (k.tdclm) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        if (tensors[t].num_elements > 0) tensors[t].exp_avg_sq[0] = globals[t].second_moment;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_simd_backend() { return std::make_unique<SimdBackend>(); }

}  // namespace luminav
