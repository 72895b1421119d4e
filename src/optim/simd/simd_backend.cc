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
// Note [factor sums]: round 0 of a TD-CLM row/factored tensor sums g^2 over
// each row and each column. It is cut into blocks of whole stripes:
// kFactorStripe columns wide (the whole row when C is narrower) and as many
// rows as make about kFactorBlockElements elements, a shape fixed by R and C
// alone. A block writes its rows' sums over its stripe and its stripe's
// column sums over its rows to their own slots; then each row sum is the
// in-order sum over the stripes and each column sum the in-order sum over
// the row blocks. So the bits do not depend on the thread count either.
// Note [multi-tensor step]: the tensors of one call form one work list (tiles
// for pass 1, the concatenated element range for pass 2), split into equal
// element shares, one parallel loop for the whole call: a thousand small
// tensors cost one wake-up, not a thousand.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "optim/core/factor_update.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/reduction_tile.h"
#include "optim/core/second_moment_layout.h"
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

constexpr size_t kFactorStripe = 1024;             // columns
constexpr size_t kFactorBlockElements = size_t{1} << 19;

// One block of Note [factor sums].
struct FactorBlock {
  size_t tensor;
  size_t row_begin, row_end, col_begin, col_end;
  size_t stripe, block;
};

// Where a row/factored tensor's block partials live in the call's buffer.
struct FactorPartials {
  size_t stripes = 0, blocks = 0;
  size_t row_at = 0;  // stripes x rows doubles: [stripe][row]
  size_t col_at = 0;  // blocks x C doubles: [block][column] (factored with blocks > 1)
};

// The updated factors of each row/factored tensor of a call and their views.
struct CallFactors {
  std::vector<core::UpdatedFactors> factors;
  std::vector<simd::FactorView> views;
  std::vector<const simd::FactorView*> view_of;  // per tensor, nullptr when none

  void prepare(const StepConstants& k, std::span<const luminav_tensor> tensors,
               std::span<const TensorGlobals> globals) {
    factors.resize(tensors.size());
    views.assign(tensors.size(), simd::FactorView{});
    view_of.assign(tensors.size(), nullptr);
    for (size_t t = 0; t < tensors.size(); ++t) {
      const core::MomentLayout l = core::moment_layout(k.tdclm, tensors[t]);
      if (!core::has_row_factor(l)) continue;
      core::update_factors(k, l, tensors[t].exp_avg_sq, globals[t], factors[t]);
      views[t].row = factors[t].row.data();
      views[t].col_over_rho = l.kind == core::SecondMoment::kFactored ? factors[t].col_over_rho.data() : nullptr;
      views[t].cols = l.cols;
      view_of[t] = &views[t];
    }
  }
};

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
    thread_local CallFactors factors_of_thread;
    CallFactors& factors = factors_of_thread;
    const bool factor_round = core::round_has_grad_sums(round);
    if (k.tdclm && !factor_round) factors.prepare(k, tensors, globals);
    tiles.clear();
    size_t total = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      // Round 0 of a row/factored tensor is its factor sums (reduce_factor_sums).
      if (k.tdclm && factor_round && core::has_row_factor(core::moment_layout(true, tensors[t]))) continue;
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
        const simd::FactorView* view = k.tdclm && !factor_round ? factors.view_of[it->tensor] : nullptr;
        simd::reduce_range(k, globals[it->tensor], tensors[it->tensor], round, view, it->begin,
                           it->end, partials[static_cast<size_t>(it - tiles.begin())].sums);
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
    if (k.tdclm && factor_round) reduce_factor_sums(k, tensors, globals, out);
  }

  // Round 0 of the row/factored tensors of a call (Note [factor sums]).
  static void reduce_factor_sums(const StepConstants& k, std::span<const luminav_tensor> tensors,
                                 std::span<const TensorGlobals> globals,
                                 std::span<luminav_partials> out) {
    thread_local std::vector<FactorBlock> blocks_of_thread;
    thread_local std::vector<FactorPartials> layout_of_thread;
    thread_local std::vector<double> sums_of_thread;
    thread_local std::vector<int32_t> magnitude_of_thread;
    std::vector<FactorBlock>& blocks = blocks_of_thread;
    std::vector<FactorPartials>& where = layout_of_thread;
    std::vector<double>& sums = sums_of_thread;
    std::vector<int32_t>& magnitude = magnitude_of_thread;
    blocks.clear();
    where.assign(tensors.size(), FactorPartials{});
    size_t doubles = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const core::MomentLayout l = core::moment_layout(k.tdclm, tensors[t]);
      if (!core::has_row_factor(l)) continue;
      const size_t width = std::min<size_t>(l.cols, kFactorStripe);
      const size_t height = std::max<size_t>(1, kFactorBlockElements / width);
      FactorPartials& w = where[t];
      w.stripes = (l.cols + kFactorStripe - 1) / kFactorStripe;
      w.blocks = (l.rows + height - 1) / height;
      w.row_at = doubles;
      doubles += w.stripes * l.rows;
      if (l.kind == core::SecondMoment::kFactored && w.blocks > 1) {
        w.col_at = doubles;
        doubles += w.blocks * l.cols;
      }
      for (size_t b = 0; b < w.blocks; ++b) {
        for (size_t s = 0; s < w.stripes; ++s) {
          blocks.push_back(FactorBlock{t, b * height, std::min<size_t>(l.rows, (b + 1) * height),
                                       s * kFactorStripe, std::min<size_t>(l.cols, (s + 1) * kFactorStripe),
                                       s, b});
        }
      }
    }
    sums.resize(doubles);
    magnitude.assign(blocks.size(), 0);
    size_t total = 0;
    for (const FactorBlock& b : blocks) total += (b.row_end - b.row_begin) * (b.col_end - b.col_begin);
    const int pieces = piece_count(blocks.size(), total, kTileElements);
    simd::run_pieces(pieces, [&](int p) {
      const size_t lo = share_start(blocks.size(), pieces, p);
      const size_t hi = share_start(blocks.size(), pieces, p + 1);
      for (size_t j = lo; j < hi; ++j) {
        const FactorBlock& b = blocks[j];
        const luminav_tensor& t = tensors[b.tensor];
        const FactorPartials& w = where[b.tensor];
        const uint64_t cols = t.num_elements / t.rows;
        double* row_sums = sums.data() + w.row_at + b.stripe * t.rows + b.row_begin;
        double* col_sums = nullptr;
        if (globals[b.tensor].col_sq_sums != nullptr) {
          col_sums = w.blocks > 1 ? sums.data() + w.col_at + b.block * cols + b.col_begin
                                  : globals[b.tensor].col_sq_sums + b.col_begin;
        }
        magnitude[j] = simd::reduce_factor_block(k, t, cols, b.row_begin, b.row_end, b.col_begin,
                                                 b.col_end, row_sums, col_sums);
      }
    });
    // In-order combination, then each tensor's partials.
    int32_t largest = 0;
    size_t j = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const core::MomentLayout l = core::moment_layout(k.tdclm, tensors[t]);
      if (!core::has_row_factor(l)) continue;
      const FactorPartials& w = where[t];
      const TensorGlobals& g = globals[t];
      largest = 0;
      for (size_t end = j + w.blocks * w.stripes; j < end; ++j) largest = std::max(largest, magnitude[j]);
      double grad_sq = 0.0;
      for (size_t r = 0; r < l.rows; ++r) {
        double row = 0.0;
        for (size_t s = 0; s < w.stripes; ++s) row += sums[w.row_at + s * l.rows + r];
        g.row_sq_sums[r] = row;
        grad_sq += row;
      }
      if (g.col_sq_sums != nullptr && w.blocks > 1) {
        for (size_t c = 0; c < l.cols; ++c) {
          double col = 0.0;
          for (size_t b = 0; b < w.blocks; ++b) col += sums[w.col_at + b * l.cols + c];
          g.col_sq_sums[c] = col;
        }
      }
      luminav_partials& o = out[t];
      o = luminav_partials{};
      if (largest >= 0x7f800000) {  // the failing path counts (Note [finite check by the largest magnitude])
        luminav_partials check{};
        simd::reduce_range(k, g, tensors[t], 0, nullptr, 0, tensors[t].num_elements, check);
        o.nonfinite_count = check.nonfinite_count;
      }
      o.grad_sq_sum = grad_sq;
      o.row_count = l.rows;
      o.row_factor_sum = core::row_factor_sum(k, l, tensors[t].exp_avg_sq, g.row_sq_sums);
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
    thread_local CallFactors factors_of_thread;
    CallFactors& factors = factors_of_thread;
    if (k.tdclm) factors.prepare(k, tensors, globals);
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
        if (begin < end) {
          simd::apply_range(k, globals[t], tensors[t], k.tdclm ? factors.view_of[t] : nullptr, begin, end);
        }
      }
    });
    if (k.tdclm) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        if (tensors[t].num_elements == 0) continue;
        const core::MomentLayout l = core::moment_layout(true, tensors[t]);
        if (l.kind == core::SecondMoment::kTensor) tensors[t].exp_avg_sq[0] = globals[t].second_moment;
        if (core::has_row_factor(l)) core::store_factors(l, factors.factors[t], tensors[t].exp_avg_sq);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_simd_backend() { return std::make_unique<SimdBackend>(); }

}  // namespace luminav
