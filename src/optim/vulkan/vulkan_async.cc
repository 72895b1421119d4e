// Note [Vulkan asynchronous step]: luminav_step_groups with `async` on the
// vulkan backend (host tensors, CLM and TD-CLM) records pass 1 (lv_reduce.comp), the
// finalize (lv_finalize.comp) and pass 2 (lv_apply.comp, indirect) of every
// tensor in one command buffer, submits it with a fence and returns. A call
// has any number of tensors: pass 1 of all of them, then the one verdict
// over all of them, then pass 2 of all of them, so a non-finite gradient in
// any tensor writes nothing in any (the synchronous passes run batches of
// kTensorsPerPass, but each batch's own submission); the limit is the
// memory allocations (async_allocation_budget), not the tensor count.
// * TD-CLM: round 0 of pass 1 also sums g^2 per row and column
//   (lv_factor_sums.comp, lv_column_totals.comp, as the synchronous pass);
//   lv_finalize.comp in factors mode then forms the new second moment (s,
//   or the row and column factors and rho) from the old one, copied into the
//   arena, with the host's formulas in the host's order (the same bits as
//   the synchronous step); round 1 (K and the norms, which read vhat) runs
//   over the same partials where cautious or the tensor bound asks; after
//   pass 2 an indirect lv_copy.comp stores the new second moment into
//   exp_avg_sq, emptied with pass 2 when the step must not write. Nothing
// waits on the step's path: the fence is looked at (vkGetFenceStatus) by the
// next step, waited for by luminav_synchronize and by any synchronous Vulkan
// pass, which also runs on this queue and may touch the same arrays.
// * Ordering: each submission starts with a memory barrier over everything
//   submitted before it, so a step reads what the step before it wrote.
// * The verdict: lv_finalize.comp forms it on the device from the tile
//   partials, with the scales, and zeroes pass 2's dispatch arguments when
//   the step must not write, so a non-finite gradient writes nothing. The
//   process's status word (host-visible, luminav_step_status) is sticky like
//   the CUDA one: after a failure every later step is refused on the device
//   until the failure is reported; the host reports it from the first call
//   that sees a completed step with it (the next luminav_step_groups, or
//   luminav_synchronize), after waiting for the steps still in flight, and
//   then clears it.
// * Memory: a step's buffers (its arena, imports of the caller's arrays,
//   staging buffers) belong to its Batch, which is destroyed only after its
//   fence has signalled (Batch's destructor waits otherwise); staged arrays
//   are copied back to the caller then, and only when the step applied;
//   before a step stages an array, the steps in flight are waited for (the
//   host array holds their results only once they are copied back).
//   The caller's arrays must stay alive and untouched until the step is
//   complete: luminav_synchronize returns, or a synchronous call on the
//   vulkan backend has run. At most kMaxInFlight steps are in flight, and
//   their allocations together within async_allocation_budget; the next one
//   waits for the oldest until it fits (back-pressure, as a full launch
//   queue).
//
// Note [device step counter]: a group's step_counter (fp32 t - 1) and
// GradScaler's found_inf are host words that the step reads and writes
// when it runs: whether an earlier step in flight applied (and advanced the
// counter) or failed (and set found_inf) is known only on the device. Each
// lives in a slot of the process's device words (host-visible, coherent,
// after the status word) while steps that use it are in flight; a slot is
// filled from the caller's word when no step in flight uses it, and written
// back to it when each such step completes. The counter's value when the
// step runs is between its slot's value when the call is made (`base`) and
// base + the increments of the steps in flight, so the host forms the
// tensor's constants for each of those steps, with the host's own formulas
// (set_step_and_lr: the bias corrections, the hash's t), and lv_finalize.comp
// in prepare mode copies the one of the counter's value into the constants
// before pass 1 reads them; a step that applies advances its groups'
// counters on the device (each group once, as the host driver does), and a
// failed check sets found_inf to 1; a non-zero found_inf skips the step
// (verdict LUMINAV_VERDICT_FOUND_INF, counted in `skipped`), as on CUDA.
// The learning rate and the gradient scale are read on the host when the
// call is made (host memory; no earlier step writes them).
#include "optim/vulkan/vulkan_async.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "optim/core/second_moment_layout.h"
#include "optim/vulkan/vulkan_batch.h"

namespace luminav::vulkan {
namespace {

constexpr size_t kMaxInFlight = 4;

// A device word's use by one step: its slot and how many times the step
// advances it (0 for found_inf).
struct SlotUse {
  uint32_t slot = 0, increments = 0;
};

struct InFlight {
  std::unique_ptr<Batch> batch;
  size_t allocations = 0;  // async_step_allocations
  std::vector<SlotUse> uses;
  const FinalizeOutcome* outcome = nullptr;  // in the step's host arena
  luminav_step_status* caller_status = nullptr;
};

struct Registry {
  std::deque<InFlight> steps;
  size_t allocations = 0;  // of the steps in flight
  std::atomic<bool> used{false};
  std::atomic<size_t> count{0};
  // The status word (host-visible, coherent), made on first use.
  VkBuffer status_buffer = VK_NULL_HANDLE;
  VkDeviceMemory status_memory = VK_NULL_HANDLE;
  luminav_step_status* status = nullptr;
  // Note [device step counter]: the words, and for each slot the caller's
  // word it mirrors, the steps in flight that use it and their increments.
  float* words = nullptr;
  struct Slot {
    float* host = nullptr;
    uint32_t users = 0, pending = 0;
  };
  Slot slots[kDeviceSlots];
  // A failure seen on a completed step and not yet reported.
  uint32_t pending = 0;
  std::string pending_name;
  luminav_step_status* last_caller_status = nullptr;
};

// Never destroyed (as the context), so no Batch destructor runs at exit; the
// steps still in flight then are waited for by wait_at_exit (Note [Vulkan
// steps at exit]).
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Note [Vulkan steps at exit]: the steps still in flight when the process
// exits are waited for, so no buffer is freed and no caller's array unmapped
// under the device. The wait is bounded: this handler runs among the C
// library's exit handlers and static destructors, and those registered after
// it run before it (a CPU driver's shader compiler makes statics lazily, for
// one), so the driver's own worker may no longer be able to finish; a
// fence that has not signalled within the bound is left, with a message, and
// its step's memory to the operating system, rather than hang the exit (seen
// once in ~50 runs of test_process_exits_cleanly_with_steps_in_flight on
// lavapipe). A caller that needs its results calls luminav_synchronize.
constexpr uint64_t kExitWaitNs = 20'000'000'000ull;

void wait_at_exit() {
  Registry& r = registry();
  size_t abandoned = 0;
  for (InFlight& s : r.steps) {
    // One bound for all of them: once a fence has missed it, the rest only get looked at.
    if (!s.batch->finished_within(abandoned == 0 ? kExitWaitNs : 0)) ++abandoned;
  }
  if (abandoned == 0) return;
  std::fprintf(stderr,
               "luminav: %zu Vulkan step(s) still in flight at exit did not complete within %llu s; "
               "their results are lost (call luminav_synchronize before exiting to keep them)\n",
               abandoned, static_cast<unsigned long long>(kExitWaitNs / 1'000'000'000ull));
}

int ensure_status(Context& c, std::string* why) {
  Registry& r = registry();
  if (r.status) return LUMINAV_STATUS_OK;
  void* mapped = nullptr;
  const VkDeviceSize bytes = kSlotsOffset + kDeviceSlots * sizeof(float);
  if (int code = create_buffer(c, bytes, kHostCoherent, 0, &r.status_buffer, &r.status_memory, &mapped, why); code) {
    return code;
  }
  std::memset(mapped, 0, bytes);
  r.status = static_cast<luminav_step_status*>(mapped);
  r.words = reinterpret_cast<float*>(static_cast<char*>(mapped) + kSlotsOffset);
  std::atexit(wait_at_exit);
  return LUMINAV_STATUS_OK;
}

// The oldest step is done: its staged arrays go back (when it applied), the
// caller sees the status word, its failure becomes pending, its buffers go.
void retire_oldest() {
  Registry& r = registry();
  InFlight& s = r.steps.front();
  const FinalizeOutcome outcome = *s.outcome;
  if (outcome.applied) s.batch->copy_back();
  if (outcome.failed && r.pending == 0) {
    r.pending = outcome.first_bad;
    r.pending_name = "the tensor at position " + std::to_string(outcome.first_bad - 1) +
                     " of the call (groups in order, from 0)";
  }
  if (s.caller_status) {
    *s.caller_status = *r.status;
    r.last_caller_status = s.caller_status;
  }
  for (const SlotUse& u : s.uses) {
    Registry::Slot& slot = r.slots[u.slot];
    *slot.host = r.words[u.slot];  // the device's value: the caller's word as the steps so far left it
    slot.pending -= u.increments;
    --slot.users;
  }
  r.allocations -= s.allocations;
  r.steps.pop_front();
  r.count = r.steps.size();
}

// The pending failure as an error, cleared on the device (nothing in flight).
int report_pending(std::string* why) {
  Registry& r = registry();
  *why = r.pending_name + ": NaN or Inf in the gradient (found by an asynchronous Vulkan step; that step and every "
         "step after it until now wrote nothing)";
  r.pending = 0;
  r.pending_name.clear();
  r.status->failed = 0;
  if (r.last_caller_status) *r.last_caller_status = *r.status;
  r.last_caller_status = nullptr;  // the caller's word need not outlive this call
  return LUMINAV_STATUS_NONFINITE_GRAD;
}

// One descriptor set's ranges.
struct Bindings {
  Bound b[kBindingCount];
};

// One tensor's chunk of the step.
struct StepChunk {
  size_t tensor, first, count;
  size_t partials_at = 0;  // bytes into the arena
  // Row layouts: its rows [row0, row0 + rows), the sums of g^2 of its rows
  // and (factored) of its columns per row block, its factor table (bytes).
  size_t row0 = 0, rows = 0, sums_at = 0, blocks_at = 0, table_at = 0;
};

// A TD-CLM tensor's second moment in the arena (FactorJob; bytes).
struct StepFactors {
  size_t length = 0, job_at = 0, old_at = 0, new_at = 0, totals_at = 0;
  Bound exp_avg_sq;  // the caller's array, bound once
};

// The slot of the caller's word `host` for a step (Note [device step
// counter]): the one steps in flight use, else a free one filled from `host`.
uint32_t slot_of(float* host, std::vector<SlotUse>& uses) {
  Registry& r = registry();
  uint32_t found = kDeviceSlots;
  for (uint32_t i = 0; i < kDeviceSlots && found == kDeviceSlots; ++i) {
    if (r.slots[i].users > 0 && r.slots[i].host == host) found = i;
  }
  for (uint32_t i = 0; i < kDeviceSlots && found == kDeviceSlots; ++i) {
    if (r.slots[i].users == 0) {
      found = i;
      r.slots[i].host = host;
      r.words[i] = *host;
    }
  }
  for (const SlotUse& u : uses)
    if (u.slot == found) return found;
  ++r.slots[found].users;
  uses.push_back({found, 0});
  return found;
}

uint32_t free_slots() {
  uint32_t n = 0;
  for (const Registry::Slot& s : registry().slots) n += s.users == 0 ? 1 : 0;
  return n;
}

}  // namespace

size_t async_step_allocations(const Context& c, std::span<const AsyncTensor> tensors) {
  constexpr size_t kArraysPerChunk = 5;  // param, grad, exp_avg, exp_avg_sq, master
  size_t n = 2;                          // the arena's host and device buffers
  for (const AsyncTensor& t : tensors) {
    n += kArraysPerChunk * div_up(t.job.num_elements, chunk_elements(c, t.job.layout)) + (t.factors ? 1 : 0);
  }
  return n;
}

size_t async_allocation_budget(const Context& c) { return c.max_allocations() / 2; }

size_t async_steps_in_flight() { return registry().count.load(); }
bool async_steps_used() { return registry().used.load(); }

int complete_async_steps(Context& c, bool wait, std::string* why) {
  (void)c;
  Registry& r = registry();
  while (!r.steps.empty()) {
    Batch& b = *r.steps.front().batch;
    if (wait) {
      if (int code = b.wait(why); code) return code;
    } else if (!b.done()) {
      break;
    }
    retire_oldest();
  }
  return LUMINAV_STATUS_OK;
}

int synchronize_async_steps(Context& c, std::string* why) {
  std::lock_guard<std::mutex> lock(c.pass_mutex());
  if (int code = complete_async_steps(c, true, why); code) return code;
  if (registry().pending) return report_pending(why);
  registry().last_caller_status = nullptr;  // the caller's word need not outlive this call
  return LUMINAV_STATUS_OK;
}

int enqueue_async_step(Context& c, std::span<AsyncTensor> tensors, const AsyncWords& words, bool skip_nonfinite,
                       luminav_step_status* caller_status, std::string* why) {
  std::lock_guard<std::mutex> lock(c.pass_mutex());
  Registry& r = registry();
  if (int code = ensure_status(c, why); code) return code;
  if (int code = complete_async_steps(c, false, why); code) return code;
  if (r.pending) {
    if (int code = complete_async_steps(c, true, why); code) return code;
    return report_pending(why);
  }
  const size_t allocations = async_step_allocations(c, tensors);
  while (!r.steps.empty() && (r.steps.size() >= kMaxInFlight || free_slots() < words.counters.size() + 1 ||
                              r.allocations + allocations > async_allocation_budget(c))) {
    if (int code = r.steps.front().batch->wait(why); code) return code;
    retire_oldest();
  }
  // The device words this step reads (Note [device step counter]).
  std::vector<SlotUse> uses;
  std::vector<uint32_t> counter_slot(words.counters.size(), kDeviceSlots), increments;
  for (size_t g = 0; g < words.counters.size(); ++g) {
    if (!words.counters[g]) continue;
    counter_slot[g] = slot_of(words.counters[g], uses);
    increments.push_back(counter_slot[g]);
  }
  const uint32_t found_inf_slot = words.found_inf ? slot_of(words.found_inf, uses) + 1 : 0;
  auto counter_of = [&](const AsyncTensor& t) {  // its group's counter slot, or kDeviceSlots
    return t.group < counter_slot.size() ? counter_slot[t.group] : kDeviceSlots;
  };
  std::vector<uint32_t> base(kDeviceSlots, 0), alternatives(kDeviceSlots, 1);
  for (const SlotUse& u : uses) {
    base[u.slot] = static_cast<uint32_t>(r.words[u.slot]);  // as the host driver reads t - 1
    alternatives[u.slot] = 1 + r.slots[u.slot].pending;
  }
  for (uint32_t s : increments) {
    for (SlotUse& u : uses)
      if (u.slot == s) ++u.increments;
  }
  // Until the step is submitted its slots are given back on any return.
  struct Release {
    std::vector<SlotUse>* uses;
    ~Release() {
      if (uses)
        for (const SlotUse& u : *uses) --registry().slots[u.slot].users;
    }
  } release{&uses};

  // The arena: constants, the finalize's tables, pass 2's dispatch
  // arguments and the outcome (host and device), then the partials (device).
  const VkDeviceSize align = std::max<VkDeviceSize>(c.storage_alignment(), 32);
  std::vector<StepChunk> chunks;
  for (size_t j = 0; j < tensors.size(); ++j) {
    const size_t per = chunk_elements(c, tensors[j].job.layout);
    for (size_t first = 0; first < tensors[j].job.num_elements; first += per) {
      StepChunk ch{j, first, std::min(per, tensors[j].job.num_elements - first)};
      if (core::has_row_factor(tensors[j].job.layout)) {
        ch.row0 = first / tensors[j].job.layout.cols;
        ch.rows = ch.count / tensors[j].job.layout.cols;
      }
      chunks.push_back(ch);
    }
  }
  const VkDeviceSize jobs_at = round_up(tensors.size() * kParamsSlotBytes, align);
  const VkDeviceSize chunks_at = round_up(jobs_at + tensors.size() * sizeof(FinalizeJob), align);
  // Pass 2's indirect dispatches: each chunk's, then each TD-CLM tensor's store of its second moment.
  const size_t stores = static_cast<size_t>(std::count_if(tensors.begin(), tensors.end(),
                                                          [](const AsyncTensor& t) { return t.factors != nullptr; }));
  const size_t indirect = chunks.size() + stores;
  const VkDeviceSize args_at = round_up(chunks_at + chunks.size() * sizeof(FinalizeChunk), align);
  const VkDeviceSize increments_at = round_up(args_at + indirect * 3 * sizeof(uint32_t), align);
  VkDeviceSize alternatives_end = round_up(increments_at + increments.size() * sizeof(uint32_t), align);
  std::vector<VkDeviceSize> alternatives_at(tensors.size(), 0);
  for (size_t j = 0; j < tensors.size(); ++j) {
    const uint32_t s = counter_of(tensors[j]);
    if (s == kDeviceSlots) continue;
    alternatives_at[j] = alternatives_end;
    alternatives_end += alternatives[s] * kParamsSlotBytes;
  }
  // TD-CLM: each tensor's FactorJob and its chunks' FactorRegion entries.
  std::vector<StepFactors> factors(tensors.size());
  VkDeviceSize factor_tables_end = alternatives_end;
  for (size_t j = 0; j < tensors.size(); ++j) {
    if (!tensors[j].factors) continue;
    const core::MomentLayout& layout = tensors[j].job.layout;
    factors[j].length = core::exp_avg_sq_length(tensors[j].job.num_elements, layout.rows, LUMINAV_MODE_TDCLM,
                                                layout.kind == core::SecondMoment::kTensor ? LUMINAV_TD_TENSOR
                                                : layout.kind == core::SecondMoment::kRow  ? LUMINAV_TD_ROW
                                                                                           : LUMINAV_TD_FACTORED);
    factors[j].job_at = factor_tables_end;
    factor_tables_end += sizeof(FactorJob);
  }
  const VkDeviceSize regions_at = factor_tables_end;
  for (const StepChunk& ch : chunks) {
    if (tensors[ch.tensor].factors && core::has_row_factor(tensors[ch.tensor].job.layout)) {
      factor_tables_end += sizeof(FactorRegion);
    }
  }
  const VkDeviceSize outcome_at = round_up(factor_tables_end, align);
  const VkDeviceSize mirrored = round_up(outcome_at + sizeof(FinalizeOutcome), align);
  VkDeviceSize arena = mirrored;
  for (StepChunk& ch : chunks) {
    if (!tensors[ch.tensor].needs_reduce) continue;
    ch.partials_at = arena;
    arena = round_up(arena + div_up(ch.count, kTileElements) * sizeof(TilePartial), align);
  }
  // Device-only: the old and new second moments, the column totals, and
  // each chunk's row sums, column blocks and factor table.
  for (size_t j = 0; j < tensors.size(); ++j) {
    if (!tensors[j].factors) continue;
    StepFactors& f = factors[j];
    f.old_at = arena;
    arena = round_up(arena + f.length * sizeof(float), align);
    f.new_at = arena;
    arena = round_up(arena + f.length * sizeof(float), align);
    if (tensors[j].job.layout.kind == core::SecondMoment::kFactored) {
      f.totals_at = arena;
      arena = round_up(arena + tensors[j].job.layout.cols * sizeof(double), align);
    }
  }
  for (StepChunk& ch : chunks) {
    const core::MomentLayout& layout = tensors[ch.tensor].job.layout;
    if (!tensors[ch.tensor].factors || !core::has_row_factor(layout)) continue;
    const bool factored = layout.kind == core::SecondMoment::kFactored;
    ch.sums_at = arena;
    arena = round_up(arena + ch.rows * sizeof(double), align);
    if (factored) {
      ch.blocks_at = arena;
      arena = round_up(arena + div_up(ch.rows, kRowBlock) * layout.cols * sizeof(double), align);
    }
    ch.table_at = arena;
    arena = round_up(arena + (ch.rows + (factored ? layout.cols : 0)) * sizeof(float), align);
  }

  auto batch = std::make_unique<Batch>(c);
  VkBuffer host = VK_NULL_HANDLE, device = VK_NULL_HANDLE;
  void* mapped = nullptr;
  if (int code = batch->host_buffer(mirrored, &host, &mapped, why); code) return code;
  if (int code = batch->device_buffer(arena, &device, why); code) return code;
  char* base_ptr = static_cast<char*>(mapped);
  std::memset(base_ptr, 0, static_cast<size_t>(mirrored));
  auto* jobs = reinterpret_cast<FinalizeJob*>(base_ptr + jobs_at);
  auto* table = reinterpret_cast<FinalizeChunk*>(base_ptr + chunks_at);
  auto* args = reinterpret_cast<uint32_t*>(base_ptr + args_at);
  for (size_t j = 0; j < tensors.size(); ++j) {
    std::memcpy(base_ptr + j * kParamsSlotBytes, &tensors[j].job.params, sizeof(StepParams));
    jobs[j].position = tensors[j].position;
    jobs[j].check_finite = tensors[j].check_finite ? 1u : 0u;
    jobs[j].params_at = static_cast<uint32_t>(j * kParamsSlotBytes / 4);
    jobs[j].num_elements = static_cast<double>(tensors[j].job.num_elements);
    const uint32_t s = counter_of(tensors[j]);
    if (s != kDeviceSlots) {
      jobs[j].counter = s + 1;
      jobs[j].base = base[s];
      jobs[j].alternatives = alternatives[s];
      jobs[j].alternatives_at = static_cast<uint32_t>(alternatives_at[j] / 4);
      for (uint32_t i = 0; i < alternatives[s]; ++i) {
        StepParams p = words.params_at_step(j, static_cast<uint64_t>(base[s]) + 1 + i);
        std::memcpy(base_ptr + alternatives_at[j] + i * kParamsSlotBytes, &p, sizeof p);
      }
    }
  }
  std::memcpy(base_ptr + increments_at, increments.data(), increments.size() * sizeof(uint32_t));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const StepChunk& ch = chunks[i];
    FinalizeJob& job = jobs[ch.tensor];
    if (tensors[ch.tensor].needs_reduce) {
      if (job.chunks == 0) job.first_chunk = static_cast<uint32_t>(i);
      ++job.chunks;
    }
    table[i] = {static_cast<uint32_t>(ch.partials_at / 4), static_cast<uint32_t>(div_up(ch.count, kTileElements))};
    const size_t groups = div_up(ch.count, kWorkgroup);
    args[3 * i] = static_cast<uint32_t>(std::min<size_t>(groups, kMaxGroups));
    args[3 * i + 1] = static_cast<uint32_t>(div_up(groups, args[3 * i]));
    args[3 * i + 2] = 1;
  }
  auto indirect_args = [](uint32_t* at, size_t elements) {
    const size_t groups = div_up(elements, kWorkgroup);
    at[0] = static_cast<uint32_t>(std::min<size_t>(groups, kMaxGroups));
    at[1] = static_cast<uint32_t>(div_up(groups, at[0]));
    at[2] = 1;
  };
  {
    auto word = [](VkDeviceSize bytes) { return static_cast<uint32_t>(bytes / 4); };
    size_t store = chunks.size();
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (!tensors[j].factors) continue;
      const StepFactors& f = factors[j];
      const core::MomentLayout& layout = tensors[j].job.layout;
      auto* fj = reinterpret_cast<FactorJob*>(base_ptr + f.job_at);
      fj->length = static_cast<uint32_t>(f.length);
      fj->rows = static_cast<uint32_t>(layout.rows);
      fj->cols = static_cast<uint32_t>(layout.cols);
      fj->old_at = word(f.old_at);
      fj->new_at = word(f.new_at);
      fj->totals_at = word(f.totals_at);
      jobs[j].factor_at = word(f.job_at);
      indirect_args(args + 3 * store++, f.length);
    }
    VkDeviceSize region = regions_at;
    for (const StepChunk& ch : chunks) {
      if (!tensors[ch.tensor].factors || !core::has_row_factor(tensors[ch.tensor].job.layout)) continue;
      auto* fj = reinterpret_cast<FactorJob*>(base_ptr + factors[ch.tensor].job_at);
      if (fj->regions++ == 0) fj->first_region = word(region);
      *reinterpret_cast<FactorRegion*>(base_ptr + region) = {static_cast<uint32_t>(ch.row0),
                                                              static_cast<uint32_t>(ch.rows), word(ch.sums_at),
                                                              word(ch.table_at)};
      region += sizeof(FactorRegion);
    }
  }
  auto arena_bound = [](VkBuffer buffer, VkDeviceSize at, VkDeviceSize bytes) {
    Bound b;
    b.buffer = buffer;
    b.offset = at;
    b.range = std::max<VkDeviceSize>(round_up(bytes, 16), 16);
    return b;
  };
  const Bound unused = arena_bound(device, 0, kParamsSlotBytes);

  // A staged array is copied now, so it must already hold what the steps in
  // flight write into it (they copy back only when done): those wait first.
  batch->before_staging([&c](std::string* w) { return complete_async_steps(c, true, w); });
  // Descriptor sets: per chunk pass 1 (round 0, the factor sums, the column
  // totals, round 1) and pass 2, a store per TD-CLM tensor, three finalizes.
  if (int code = batch->begin(static_cast<uint32_t>(5 * chunks.size() + stores + 3), why); code) return code;
  batch->after_earlier_submissions();
  std::vector<VkBufferCopy> totals;
  for (size_t j = 0; j < tensors.size(); ++j) {
    if (factors[j].totals_at) totals.push_back({0, factors[j].totals_at, tensors[j].job.layout.cols * sizeof(double)});
  }
  batch->zero(device, totals);  // the column totals start from 0 (made visible by the copy's barrier)
  batch->copy(host, device, {{0, 0, outcome_at}}, true);
  // The old second moments into the arena (the factors mode reads them there).
  PassStats stats;
  for (size_t j = 0; j < tensors.size(); ++j) {
    if (!tensors[j].factors) continue;
    StepFactors& f = factors[j];
    Source src;
    src.host = tensors[j].factors;
    if (int code = batch->bind(src, 0, f.length, 4, true, &f.exp_avg_sq, stats, why); code) return code;
    batch->copy(f.exp_avg_sq.buffer, device,
                {{f.exp_avg_sq.offset + f.exp_avg_sq.shift * sizeof(float), f.old_at, f.length * sizeof(float)}}, true);
  }
  // lv_finalize.comp, in either mode, over the arena, the status and the device words.
  enum class FinalizeMode : uint32_t { kDecide = kFinalizeDecide, kPrepare = kFinalizePrepare, kFactors = kFinalizeFactors };
  auto finalize = [&](FinalizeMode mode) {
    Bound b[kBindingCount];
    for (Bound& x : b) x = unused;
    b[0] = arena_bound(device, 0, arena);
    b[kBindParam] = arena_bound(r.status_buffer, kSlotsOffset, kDeviceSlots * sizeof(float));
    b[kBindOut] = arena_bound(r.status_buffer, 0, sizeof(luminav_step_status));
    b[kBindOut2] = arena_bound(host, outcome_at, sizeof(FinalizeOutcome));
    FinalizePush push{};
    push.jobs = static_cast<uint32_t>(tensors.size());
    push.jobs_at = static_cast<uint32_t>(jobs_at / 4);
    push.chunks_at = static_cast<uint32_t>(chunks_at / 4);
    push.args_at = static_cast<uint32_t>(args_at / 4);
    push.args = static_cast<uint32_t>(indirect);
    push.skip_nonfinite = skip_nonfinite ? 1u : 0u;
    push.increments_at = static_cast<uint32_t>(increments_at / 4);
    push.increments = static_cast<uint32_t>(increments.size());
    push.mode = static_cast<uint32_t>(mode);
    push.found_inf = found_inf_slot;
    VkPipeline pipeline = c.pipeline(Shader::kFinalize, 0, 0, why);
    return pipeline ? batch->dispatch_raw(pipeline, b, &push, sizeof push, 1, why) : LUMINAV_STATUS_DRIVER_ERROR;
  };
  if (!increments.empty()) {
    // The constants of the step each counter is at, before pass 1 reads them.
    if (int code = finalize(FinalizeMode::kPrepare); code) return code;
    batch->shader_barrier();
  }
  // Every array of every chunk bound once, for both passes.
  std::vector<Bindings> bound(chunks.size());
  std::vector<ChunkPush> pushes(chunks.size());
  // Pass 1 (lv_reduce.comp) over chunk i, into its tile partials.
  auto reduce_chunk = [&](size_t i) {
    const StepChunk& ch = chunks[i];
    const TensorJob& job = tensors[ch.tensor].job;
    Bound reduce[kBindingCount];
    std::copy(bound[i].b, bound[i].b + kBindingCount, reduce);
    reduce[kBindOut] = arena_bound(device, ch.partials_at, div_up(ch.count, kTileElements) * sizeof(TilePartial));
    VkPipeline pipeline = c.pipeline(Shader::kReduce, job.param_dtype, job.grad_dtype, why, shader_features(job.params));
    return pipeline ? batch->dispatch(pipeline, reduce, pushes[i], static_cast<uint32_t>(div_up(ch.count, kTileElements)),
                                      1, why)
                    : LUMINAV_STATUS_DRIVER_ERROR;
  };
  for (size_t i = 0; i < chunks.size(); ++i) {
    const StepChunk& ch = chunks[i];
    TensorJob& job = tensors[ch.tensor].job;
    Bound (&b)[kBindingCount] = bound[i].b;
    for (Bound& x : b) x = unused;
    b[kBindParams] = arena_bound(device, ch.tensor * kParamsSlotBytes, sizeof(StepParams));
    int code = batch->bind(job.grad, ch.first, ch.count, dtype_bytes(job.grad_dtype), false, &b[kBindGrad], stats, why);
    if (!code) code = batch->bind(job.exp_avg, ch.first, ch.count, 4, true, &b[kBindExpAvg], stats, why);
    if (!code && job.exp_avg_sq.present()) {
      code = batch->bind(job.exp_avg_sq, ch.first, ch.count, 4, true, &b[kBindExpAvgSq], stats, why);
    }
    if (!code && job.master.present()) {
      code = batch->bind(job.master, ch.first, ch.count, 4, true, &b[kBindMaster], stats, why);
    }
    if (!code) code = batch->bind(job.param, ch.first, ch.count, dtype_bytes(job.param_dtype), true, &b[kBindParam], stats, why);
    if (code) return code;
    ChunkPush& push = pushes[i];
    push.n = static_cast<uint32_t>(ch.count);
    push.index_base = job.index_offset + ch.first;
    push.param_shift = b[kBindParam].shift;
    push.grad_shift = b[kBindGrad].shift;
    push.m_shift = b[kBindExpAvg].shift;
    push.v_shift = b[kBindExpAvgSq].shift;
    push.master_shift = b[kBindMaster].shift;
    const bool row_factors = tensors[ch.tensor].factors && core::has_row_factor(job.layout);
    const bool factored = job.layout.kind == core::SecondMoment::kFactored;
    if (row_factors) {
      push.rows = static_cast<uint32_t>(ch.rows);
      b[kBindFactor] = arena_bound(device, ch.table_at, (ch.rows + (factored ? job.layout.cols : 0)) * sizeof(float));
    }
    if (tensors[ch.tensor].needs_reduce) {
      if (int code = reduce_chunk(i); code) return code;
    }
    if (row_factors) {
      const Bound blocks = arena_bound(device, ch.blocks_at, div_up(ch.rows, kRowBlock) * job.layout.cols * sizeof(double));
      const Bound totals = arena_bound(device, factors[ch.tensor].totals_at, job.layout.cols * sizeof(double));
      code = record_factor_sums(c, *batch, job, b, push, arena_bound(device, ch.sums_at, ch.rows * sizeof(double)),
                                factored ? &blocks : nullptr, factored ? &totals : nullptr, why);
      if (code) return code;
    }
  }
  batch->shader_barrier();
  if (stores > 0) {
    // TD-CLM: the new second moments, then round 1 (K and the norms read
    // vhat) over the same partials, which the decide then reads.
    if (int code = finalize(FinalizeMode::kFactors); code) return code;
    batch->shader_barrier();
    bool second_round = false;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const AsyncTensor& t = tensors[chunks[i].tensor];
      if (!t.factors || !(t.job.params.cautious != 0 || t.job.params.bound_mode == LUMINAV_BOUND_TENSOR)) continue;
      if (int code = reduce_chunk(i); code) return code;
      second_round = true;
    }
    if (second_round) batch->shader_barrier();
  }
  if (int code = finalize(FinalizeMode::kDecide); code) return code;
  batch->indirect_barrier();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const TensorJob& job = tensors[chunks[i].tensor].job;
    const Bound (&b)[kBindingCount] = bound[i].b;
    VkPipeline pipeline = c.pipeline(Shader::kApply, job.param_dtype, job.grad_dtype, why, shader_features(job.params));
    const int code = pipeline ? batch->dispatch_indirect(pipeline, b, pushes[i], device, args_at + 12 * i, why)
                              : LUMINAV_STATUS_DRIVER_ERROR;
    if (code) return code;
  }
  // TD-CLM: the new second moments into exp_avg_sq (lv_copy.comp), emptied
  // with pass 2 when the step must not write.
  size_t store = chunks.size();
  for (size_t j = 0; j < tensors.size(); ++j) {
    if (!tensors[j].factors) continue;
    const StepFactors& f = factors[j];
    Bound b[kBindingCount];
    for (Bound& x : b) x = unused;
    b[kBindGrad] = arena_bound(device, f.new_at, f.length * sizeof(float));
    b[kBindExpAvg] = f.exp_avg_sq;
    ChunkPush push{};
    push.n = static_cast<uint32_t>(f.length);
    push.m_shift = f.exp_avg_sq.shift;
    VkPipeline pipeline = c.pipeline(Shader::kCopy, 0, 0, why);
    const int code = pipeline ? batch->dispatch_indirect(pipeline, b, push, device, args_at + 12 * store++, why)
                              : LUMINAV_STATUS_DRIVER_ERROR;
    if (code) return code;
  }
  if (int code = batch->submit(why); code) return code;
  InFlight step;
  step.outcome = reinterpret_cast<const FinalizeOutcome*>(base_ptr + outcome_at);
  step.caller_status = caller_status;
  step.batch = std::move(batch);
  step.allocations = allocations;
  r.allocations += allocations;
  for (const SlotUse& u : uses) r.slots[u.slot].pending += u.increments;
  step.uses = std::move(uses);
  release.uses = nullptr;
  r.steps.push_back(std::move(step));
  r.count = r.steps.size();
  r.used = true;
  return LUMINAV_STATUS_OK;
}

}  // namespace luminav::vulkan
