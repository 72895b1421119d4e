// The one by-value parameter of every LuminaV CUDA kernel, shared by host and device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/reduction_tile.h"
#include "optim/core/step_constants.h"
#include "optim/dispatch/async_workspace.h"

namespace luminav::cuda {

// Note [tiles and launches]: a launch covers up to kMaxSlots tensors (the
// multi-tensor launch of torch's multi_tensor_apply). Each tensor is cut into
// tiles of kTileElems elements; block b of the grid works on one tile of the
// slot j with first_tile[j] <= b < first_tile[j+1]. Tiles are fixed by the
// tensor alone (not by the grid or the device), so the per-tile reduction
// partials of pass 1, and their combination in tile order, give the same bits
// on every run (Note [deterministic reductions] in kernels.cu).
//
// Note [one launch for a model's tensors]: with 40 slots (what fits the
// 4 KiB parameter block of CUDA before 12.1) the Llama 98M loop's 111 tensors
// took three reductions and three applies a step, and TD-CLM's 86 factored
// tensors three launches of each factor kernel. Each launch ends on a partial
// wave (its last blocks run while most SMs wait for the next launch): on an
// H100 the three reductions took 178 us against 146 us for one, the three
// applies 957 against 942 us, and TD-CLM's factor kernels 242 against 192 us;
// the step's kernels 1,148 -> 1,098 us (CLM) and 985 -> 899 us (TD-CLM),
// docs/benchmarks.md, row L1-3g. CUDA 12.1 raised the limit to 32,764 bytes
// on Volta and later GPUs (drivers r530 and later); every architecture we
// build for is Turing or later, so a launch takes 128 tensors (~12 KiB), and
// the by-value struct stays in the constant bank where every block reads its
// slot. The cost is a larger block copied per eager or recorded launch; a
// replayed graph copies nothing.
inline constexpr size_t kMaxParamBytes = 32764;
// The driver that takes kMaxParamBytes (cuDriverGetVersion of CUDA 12.1); an
// older one is refused with that reason when the kernels are loaded, not at
// the first launch.
inline constexpr int kMinDriverVersion = 12010;
inline constexpr int kBlockSize = 256;
inline constexpr uint32_t kApplyTileElems = 8192;  // 4 rounds of 2 groups of 4 per thread
// Reductions tile as core says (Note [scratch layout] in core/reduction_tile.h)
// so that a caller's scratch of luminav_scratch_bytes(N) always fits.
inline constexpr uint32_t kReduceTileElems = static_cast<uint32_t>(core::kReductionTile);
inline constexpr uint32_t kTilePartialStride = static_cast<uint32_t>(core::kTilePartialBytes);
inline constexpr int kMaxSlots = 128;  // Note [one launch for a model's tensors]; at most kBlockSize (a thread a slot)

// The kernels' parameter list as manifest.json records it; change the tag
// whenever LaunchParams or a struct the kernels share with the host through
// the workspace (dispatch::FactorView: abi-8) changes, so that stale artifact
// directories are refused.
// (Every kernel takes one by-value struct: LaunchParams, or PrepareParams and
// CommitParams for the first and last kernel of an asynchronous step.)
inline constexpr const char* kLaunchAbi = "(const LaunchParams) luminav-cuda-abi-8";

// Which fields of luminav_partials a reduction fills (Note [reduction rounds]).
enum ReduceFields : uint32_t {
  kReduceGrad = 1u,    // nonfinite_count, grad_sq_sum
  kReduceUpdate = 2u,  // agree_count, update_sq_sum (and weight_sq_sum with kReduceWeights)
  // Unsharded TD-CLM round 0: row/factored tensors' gradients are read (and
  // checked) by luminav_factor_sums, so their reduction tiles read nothing.
  kReduceFactorGrads = 4u,
  // weight_sq_sum (the tensor bound's ||x||). Without it the update round does
  // not read the parameters: the cautious mask alone reads g and m (and CLM's v).
  kReduceWeights = 8u,
};

// The fields of a reduction round (the unsharded step adds kReduceFactorGrads).
inline uint32_t reduce_fields(const core::StepConstants& k, int round) {
  uint32_t fields = 0;
  if (core::round_has_grad_sums(round)) fields |= kReduceGrad;
  if (core::round_has_update_sums(k, round)) {
    fields |= kReduceUpdate;
    if (core::update_sums_need_weights(k)) fields |= kReduceWeights;
  }
  return fields;
}

// What luminav_sharded_exchange does (Note [sharded phases on the device] in
// cuda_backend.cc): the header of this rank (found_inf or an earlier
// failure), pack each slot's combined partials into its exchange record, or
// fold each slot's reduced record into its globals.
enum ExchangeMode : uint32_t { kExchangeHeader = 0u, kExchangePack = 1u, kExchangeFold = 2u };

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
  uint32_t position;    // asynchronous step: the tensor's position in the call (status word)
  uint32_t moment_kind; // core::SecondMoment of a TD-CLM tensor (asynchronous step)
};

// Note [factors on the device]: dispatch/async_workspace.h.
using dispatch::FactorView;

struct LaunchParams {
  core::StepConstants k;
  uint32_t num_slots;
  uint32_t reduce_fields;
  uint32_t tile_elems;                // kApplyTileElems or kReduceTileElems
  uint32_t round;                     // asynchronous finalize: the reduction round
  unsigned char* tile_partials;       // device: one luminav_partials per tile, kTilePartialStride apart
  luminav_partials* tensor_partials;  // device: one per slot
  float* scalars;                     // device: gather output, one per slot
  // Note [device-resident step]: the asynchronous step (luminav_groups.h)
  // reads what the host does not know from the workspace: the group's
  // constants (t, lr and the gradient scale read on the device), the
  // tensors' globals (finalized on the device; nullptr: the slots' own
  // values) and the step's shared words (a bad verdict makes pass 2 write
  // nothing). All nullptr on the synchronous path.
  const core::StepConstants* k_device;
  core::TensorGlobals* globals;       // read: indexed by globals_base + slot (nullptr: the slots')
  core::TensorGlobals* finalized;     // written by the reduction's finalize, indexed likewise
  uint32_t* slot_counters;            // Note [last block finalizes]; indexed likewise
  dispatch::AsyncStepWords* words;
  const FactorView* factor_views;     // Note [factors on the device]; indexed like the globals
  uint32_t globals_base;
  uint32_t exchange_mode;             // luminav_sharded_exchange: an ExchangeMode
  double* exchange;                   // sharded step: the caller's exchange buffer (core/exchange_record.h)
  uint32_t first_tile[kMaxSlots + 1];
  TensorSlot slots[kMaxSlots];
};
static_assert(sizeof(LaunchParams) <= kMaxParamBytes, "kernel parameters must fit the 32,764-byte limit");
static_assert(kMaxSlots <= kBlockSize, "luminav_gather_scalars and luminav_sharded_exchange take a thread a slot");

// The first kernel of an asynchronous step: each group's constants from the
// host's, with t, lr and 1/sigma read from device memory where given; and
// the step's shared words reset (Note [device-resident step]).
struct PrepareGroup {
  core::StepConstants k;
  const float* step_counter;  // fp32 t - 1, or nullptr: k.step
  const void* lr;             // or nullptr: lr_host
  int lr_dtype;               // LUMINAV_SCALAR_*
  int reserved;
  double lr_host, beta1, beta2, weight_decay;
};
inline constexpr int kMaxPrepareGroups = 20;

struct PrepareParams {
  core::StepConstants* k_out;        // workspace constants of group `first_group`
  dispatch::AsyncStepWords* words;   // reset when reset_words
  const luminav_step_status* status;
  const float* found_inf;            // GradScaler's, or nullptr
  const float* grad_scale;           // sigma, or nullptr
  uint32_t num_groups;
  uint32_t reset_words;
  PrepareGroup groups[kMaxPrepareGroups];
};
static_assert(sizeof(PrepareParams) <= 4096, "kernel parameters must fit the 4 KiB limit");

// The factor kernels of an asynchronous step (Note [factors on the device],
// Note [factor tiles] in dispatch/async_workspace.h): luminav_factor_sums_g*
// reads the gradient once in tiles of kFactorChunkRows x kFactorTileCols
// and writes each tile's row and column partials of g^2 (in double), and, in
// the unsharded step, does the finite check of these tensors (round 0's
// reduction skips their gradients: kReduceFactorGrads); luminav_factor_rows
// forms the new row factors (blocks of kFactorRowBlock rows) and each block's
// sum of them; luminav_factor_cols forms rho, the new column factors and
// col/rho (blocks of kBlockSize columns) and the view pass 2 reads. Each
// kernel's grid is its own prefix sum in first_block (set per launch).
struct FactorSlot {
  const void* grad;
  const float* old_factors;  // exp_avg_sq: row then col
  double* row_sums;          // factor_strips(cols) x rows partials
  double* row_block_sums;    // factor_row_blocks(rows)
  double* col_sums;          // factored only: factor_chunks(rows) x cols partials
  float* row_new;
  float* col_new;            // factored only
  float* col_over_rho;       // factored only
  FactorView* view;
  core::TensorGlobals* globals;
  uint64_t rows, cols;
  uint64_t exchange_cols;    // sharded: float64 offset of its column sums in the exchange
  uint32_t position;         // its position in the call (status word; sharded: its exchange record)
  uint32_t vector_ok;        // 1: cols % 4 == 0 and the gradient aligned to 4 elements (vector loads)
};
inline constexpr int kMaxFactorSlots = 128;  // Note [one launch for a model's tensors]
struct FactorParams {
  const core::StepConstants* k_device;
  dispatch::AsyncStepWords* words;
  double* exchange;          // luminav_sharded_factors: the exchange buffer
  uint32_t num_slots;
  uint32_t mode;             // luminav_sharded_factors: kExchangePack or kExchangeFold (finish)
  uint32_t finite_check;     // luminav_factor_sums: 1 in the unsharded step (kReduceFactorGrads)
  uint32_t reserved;
  uint32_t first_block[kMaxFactorSlots + 1];
  FactorSlot slots[kMaxFactorSlots];
};
static_assert(sizeof(FactorParams) <= kMaxParamBytes, "kernel parameters must fit the 32,764-byte limit");

// The last kernel: the verdict into the status word, and the step counters
// of an applied step advanced.
inline constexpr int kMaxCommitCounters = 400;
struct CommitParams {
  dispatch::AsyncStepWords* words;
  luminav_step_status* status;
  float* found_inf;
  uint32_t skip_nonfinite;
  uint32_t decide;        // 1 in the first commit launch of a step
  uint32_t num_counters;
  uint32_t reserved;
  float* step_counters[kMaxCommitCounters];
};
static_assert(sizeof(CommitParams) <= 4096, "kernel parameters must fit the 4 KiB limit");
static_assert(sizeof(luminav_partials) <= core::kTilePartialBytes, "tile partial layout");

}  // namespace luminav::cuda
