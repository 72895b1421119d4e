// The spec's error table, checked once per call.
#include "optim/core/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "optim/core/dtype.h"
#include "optim/core/reduction_tile.h"
#include "optim/core/second_moment_layout.h"

namespace luminav::core {
namespace {

Status out_of_range(const char* name, const char* requirement, double value) {
  return Status::invalid(std::string(name) + " must be " + requirement + " (got " +
                         format_number(value) + ")");
}

Status check_flag(const char* name, int value) {
  if (value == 0 || value == 1) return Status::success();
  return Status::invalid(std::string(name) + " must be 0 or 1 (got " + std::to_string(value) + ")");
}

std::string hex_address(uintptr_t address) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(address));
  return buffer;
}

// One buffer's byte range [begin, end) and what names it in messages (built
// only when a message needs it: a step validates every tensor every call).
constexpr size_t kNoIndex = static_cast<size_t>(-1);
struct ByteRange {
  uintptr_t begin;
  uintptr_t end;
  size_t group;   // kNoIndex outside luminav_step_groups
  size_t tensor;  // kNoIndex for a one-tensor call and the scratch
  const char* field;
};

std::string name_of(const ByteRange& r) {
  std::string name;
  if (r.group != kNoIndex) name += "groups[" + std::to_string(r.group) + "].";
  if (r.tensor != kNoIndex) name += "tensors[" + std::to_string(r.tensor) + "].";
  return name + r.field;
}

// Note [overlap check memo]: a training loop validates the same buffers
// every step, and only some of them move between steps (zero_grad(
// set_to_none=True) reallocates every gradient). A memo keeps the previous
// call's ranges and their order sorted by (begin, position); the next call
// with as many ranges keeps that order for the ranges that did not change,
// sorts only those that did and merges the two: the same order a full sort
// gives, so the same verdict and the same message, at the cost of sorting
// what moved. Small calls do not use it.
//
// Note [moved gradients]: in that loop nothing but the gradients moves, and
// building, comparing and merging every byte range (5,000 for a thousand
// tensors) was most of the validation's cost in the F1 step. So a memo also
// keeps the tensors of the last call it accepted; a call whose tensors equal
// them in every field but `grad` passes every check but the gradients' own
// (the others read only those fields and the mode), and its overlap check
// merges the moved gradients' ranges into the kept order and scans it. Only a
// verdict of "no problem" is taken from there: anything else (a field that
// changed, a gradient that is NULL, misaligned or overlaps) goes through the
// full check, which names the problem as it always has.
struct MovedRange {
  uintptr_t begin, end;
  uint32_t position;  // of the range in the call's range list
  uint32_t tensor;
};
constexpr uint32_t kNoRange = static_cast<uint32_t>(-1);

struct OverlapMemo {
  std::vector<uintptr_t> begins, ends;  // the previous call's ranges, by position
  std::vector<uint32_t> order;          // their positions sorted by (begin, position)
  std::vector<uint32_t> kept, moved;    // scratch of the merge
  // Note [moved gradients]: the last accepted call.
  bool accepted = false;
  int buffer_mode = -1;
  std::vector<luminav_tensor> tensors;
  std::vector<uint32_t> grad_at;        // position of each tensor's grad range (kNoRange: none)
  std::vector<MovedRange> moved_ranges; // scratch
  std::vector<uint8_t> is_moved;        // scratch, by position (all 0 between calls)
  std::vector<uint32_t> merged;         // scratch: the next order
  size_t last_ranges = 0;               // ranges of the last full check
};
constexpr size_t kMemoMinRanges = 64;

Status check_no_overlap(const std::vector<ByteRange>& ranges, OverlapMemo* memo);

// The byte ranges of a call, reused by the thread's calls (a thousand-tensor
// step has 5,000 of them: no allocation per step).
std::vector<ByteRange>& ranges_of_thread(size_t reserve) {
  thread_local std::vector<ByteRange> ranges;
  ranges.clear();
  ranges.reserve(reserve);
  return ranges;
}

Status validate_tensors_into(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                             const void* scratch, size_t scratch_bytes, OverlapMemo* memo);

}  // namespace

Status validate_hyperparams(const luminav_hyperparams* hp) {
  if (hp == nullptr) return Status::invalid("hyperparams must not be NULL");
  // NaN fails every comparison below, so each check also rejects NaN.
  if (!(hp->lr >= 0.0) || std::isinf(hp->lr)) return out_of_range("lr", ">= 0 and finite", hp->lr);
  if (!(hp->beta1 >= 0.0 && hp->beta1 < 1.0)) return out_of_range("beta1", "in [0, 1)", hp->beta1);
  if (!(hp->beta2 >= 0.0 && hp->beta2 < 1.0)) return out_of_range("beta2", "in [0, 1)", hp->beta2);
  if (!(hp->eps > 0.0) || std::isinf(hp->eps)) return out_of_range("eps", "> 0 and finite", hp->eps);
  if (!std::isfinite(hp->weight_decay))
    return out_of_range("weight_decay", "finite", hp->weight_decay);
  if (!(hp->tau >= 0.0) || std::isinf(hp->tau)) return out_of_range("tau", ">= 0 and finite", hp->tau);
  if (!(hp->lam >= 0.0 && hp->lam <= 1.0)) return out_of_range("lam", "in [0, 1]", hp->lam);
  if (hp->buffer_mode != LUMINAV_MODE_CLM && hp->buffer_mode != LUMINAV_MODE_TDCLM) {
    return Status::invalid("buffer_mode must be 2 (CLM) or 1 (TD-CLM) (got " +
                           std::to_string(hp->buffer_mode) + ")");
  }
  if (hp->bound_mode != LUMINAV_BOUND_NONE && hp->bound_mode != LUMINAV_BOUND_TENSOR &&
      hp->bound_mode != LUMINAV_BOUND_ELEMENT && hp->bound_mode != LUMINAV_BOUND_RMS) {
    return Status::invalid("bound_mode must be 0 (none), 1 (tensor), 2 (element) or 3 (rms) (got " +
                           std::to_string(hp->bound_mode) + ")");
  }
  if (hp->bound_mode != LUMINAV_BOUND_NONE) {
    if (!(hp->bound_ratio > 0.0) || std::isinf(hp->bound_ratio))
      return out_of_range("bound_ratio", "> 0 and finite when bound_mode is 1, 2 or 3",
                          hp->bound_ratio);
  } else if (std::isnan(hp->bound_ratio)) {
    return out_of_range("bound_ratio", "a number", hp->bound_ratio);
  }
  if (Status s = check_flag("cautious", hp->cautious); !s.ok()) return s;
  if (Status s = check_flag("check_finite", hp->check_finite); !s.ok()) return s;
  if (Status s = check_flag("stochastic_rounding", hp->stochastic_rounding); !s.ok()) return s;
  if (hp->step == 0) return Status::invalid("step must be >= 1 (got 0)");
  if (!(hp->grad_scale > 0.0) || std::isinf(hp->grad_scale))
    return out_of_range("grad_scale", "> 0 and finite", hp->grad_scale);
  return Status::success();
}

size_t scratch_bytes_for_tensors(std::span<const luminav_tensor> tensors) {
  size_t total = 0;
  for (const luminav_tensor& t : tensors) total += core::scratch_bytes_for(t.num_elements);
  return total == 0 ? core::scratch_bytes_for(0) : total;
}

Status validate_tensors(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                        const void* scratch, size_t scratch_bytes) {
  thread_local OverlapMemo memo;
  return validate_tensors_into(hp, tensors, scratch, scratch_bytes, &memo);
}

namespace {

// Every field the checks read but `grad` (Note [moved gradients]).
bool same_but_grad(const luminav_tensor& a, const luminav_tensor& b) {
  return a.param == b.param && a.exp_avg == b.exp_avg && a.exp_avg_sq == b.exp_avg_sq && a.master == b.master &&
         a.num_elements == b.num_elements && a.index_offset == b.index_offset && a.param_dtype == b.param_dtype &&
         a.grad_dtype == b.grad_dtype && a.rows == b.rows && a.td_factor == b.td_factor;
}

// True when `tensors` differ from the memo's accepted call in gradients only
// and every moved gradient is present, aligned and overlaps nothing: then
// the call passes, and the memo holds it. False: the full check decides.
bool passes_as_moved_gradients(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                               OverlapMemo& memo) {
  if (!memo.accepted || memo.buffer_mode != hp.buffer_mode || memo.tensors.size() != tensors.size()) return false;
  std::vector<MovedRange>& moved = memo.moved_ranges;
  moved.clear();
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const luminav_tensor& t = tensors[ti];
    const luminav_tensor& was = memo.tensors[ti];
    if (!same_but_grad(t, was)) return false;
    if (t.grad == was.grad || memo.grad_at[ti] == kNoRange) continue;  // unchanged, or N = 0 (never read)
    const size_t grad_size = dtype_size(t.grad_dtype);
    const auto address = reinterpret_cast<uintptr_t>(t.grad);
    const size_t bytes = t.num_elements * grad_size;
    if (address == 0 || address % grad_size != 0 || address > std::numeric_limits<uintptr_t>::max() - bytes) {
      return false;
    }
    moved.push_back({address, address + bytes, memo.grad_at[ti], static_cast<uint32_t>(ti)});
  }
  if (moved.empty()) return true;
  std::sort(moved.begin(), moved.end(), [](const MovedRange& a, const MovedRange& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.position < b.position);
  });
  for (const MovedRange& m : moved) memo.is_moved[m.position] = 1;
  // The kept ranges in their order merged with the moved ones: the order a
  // full sort by (begin, position) gives; sorted by start, a range overlaps
  // an earlier one iff it starts before the furthest end seen so far.
  std::vector<uint32_t>& merged = memo.merged;
  merged.clear();
  uintptr_t furthest_end = 0;
  bool overlap = false;
  size_t k = 0, m = 0;
  const size_t n = memo.order.size();
  while (!overlap && (k < n || m < moved.size())) {
    while (k < n && memo.is_moved[memo.order[k]]) ++k;
    uintptr_t begin, end;
    const bool take_moved = m < moved.size() &&
                            (k >= n || moved[m].begin < memo.begins[memo.order[k]] ||
                             (moved[m].begin == memo.begins[memo.order[k]] && moved[m].position < memo.order[k]));
    if (take_moved) {
      begin = moved[m].begin;
      end = moved[m].end;
      merged.push_back(moved[m++].position);
    } else if (k < n) {
      begin = memo.begins[memo.order[k]];
      end = memo.ends[memo.order[k]];
      merged.push_back(memo.order[k++]);
    } else {
      break;
    }
    if (merged.size() > 1 && begin < furthest_end) overlap = true;
    if (merged.size() == 1 || end > furthest_end) furthest_end = end;
  }
  for (const MovedRange& r : moved) memo.is_moved[r.position] = 0;
  if (overlap) return false;  // the full check names the pair
  memo.order.swap(merged);
  for (const MovedRange& r : moved) {
    memo.begins[r.position] = r.begin;
    memo.ends[r.position] = r.end;
    memo.tensors[r.tensor].grad = tensors[r.tensor].grad;
  }
  return true;
}

Status validate_tensors_checked(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                                const void* scratch, size_t scratch_bytes, OverlapMemo* memo);

// The full check, or the memo's shortcut for moved gradients (Note [moved
// gradients]); the memo records an accepted call for the next one.
Status validate_tensors_into(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                             const void* scratch, size_t scratch_bytes, OverlapMemo* memo) {
  if (memo == nullptr || scratch != nullptr) return validate_tensors_checked(hp, tensors, scratch, scratch_bytes, memo);
  if (passes_as_moved_gradients(hp, tensors, *memo)) return Status::success();
  memo->accepted = false;
  memo->grad_at.assign(tensors.size(), kNoRange);
  Status s = validate_tensors_checked(hp, tensors, nullptr, 0, memo);
  // Only a call that the memo's order describes (check_no_overlap keeps it
  // from kMemoMinRanges on) can be the base of the next one.
  if (s.ok() && memo->last_ranges >= kMemoMinRanges && memo->begins.size() == memo->last_ranges &&
      memo->order.size() == memo->last_ranges) {
    memo->accepted = true;
    memo->buffer_mode = hp.buffer_mode;
    memo->tensors.assign(tensors.begin(), tensors.end());
    memo->is_moved.assign(memo->begins.size(), 0);
  }
  return s;
}

Status validate_tensors_checked(const luminav_hyperparams& hp, std::span<const luminav_tensor> tensors,
                                const void* scratch, size_t scratch_bytes, OverlapMemo* memo) {
  const bool several = tensors.size() > 1;
  std::vector<ByteRange>& ranges = ranges_of_thread(tensors.size() * 5 + 1);
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  const bool note_grads = memo != nullptr && memo->grad_at.size() == tensors.size();

  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const luminav_tensor& t = tensors[ti];
    auto named = [&](const char* field) {
      return (several ? "tensors[" + std::to_string(ti) + "]." : std::string()) + field;
    };

    const size_t param_size = dtype_size(t.param_dtype);
    if (param_size == 0) {
      return Status::invalid(named("param_dtype") + " must be 0 (f32), 1 (bf16) or 2 (f16) (got " +
                             std::to_string(t.param_dtype) + ")");
    }
    const size_t grad_size = dtype_size(t.grad_dtype);
    if (grad_size == 0) {
      return Status::invalid(named("grad_dtype") + " must be 0 (f32), 1 (bf16) or 2 (f16) (got " +
                             std::to_string(t.grad_dtype) + ")");
    }
    const bool tdclm = hp.buffer_mode == LUMINAV_MODE_TDCLM;
    if (tdclm && t.td_factor != LUMINAV_TD_FACTORED && t.td_factor != LUMINAV_TD_ROW &&
        t.td_factor != LUMINAV_TD_TENSOR) {
      return Status::invalid(named("td_factor") +
                             " must be 0 (factored), 1 (row) or 2 (tensor) (got " +
                             std::to_string(t.td_factor) + ")");
    }
    const size_t n = t.num_elements;
    if (n == 0) continue;  // nothing to read or write
    if (n > kMax / 4) {
      return Status::invalid(named("num_elements") + " is too large (got " + std::to_string(n) + ")");
    }
    if (t.index_offset > std::numeric_limits<uint64_t>::max() - n) {
      return Status::invalid(named("index_offset") + " + num_elements overflows (got index_offset " +
                             std::to_string(t.index_offset) + ")");
    }

    const bool by_rows = tdclm && t.td_factor != LUMINAV_TD_TENSOR;
    if (by_rows) {
      if (t.rows == 0 || n % t.rows != 0) {
        return Status::invalid(named("rows") + " must divide num_elements " + std::to_string(n) +
                               " with td_factor " + (t.td_factor == LUMINAV_TD_ROW ? "row" : "factored") +
                               " (got rows " + std::to_string(t.rows) + ")");
      }
      const uint64_t cols = n / t.rows;
      if (t.index_offset % cols != 0) {
        return Status::invalid(named("index_offset") + " must be a multiple of C = " +
                               std::to_string(cols) +
                               " (a shard holds whole rows; got index_offset " +
                               std::to_string(t.index_offset) + ", a boundary inside a row)");
      }
    }
    const size_t second_floats = exp_avg_sq_length(n, t.rows, hp.buffer_mode, t.td_factor);

    struct Buffer {
      const char* field;
      const void* pointer;
      size_t bytes;
      size_t alignment;
      bool required;
    };
    const Buffer buffers[] = {
        {"param", t.param, n * param_size, param_size, true},
        {"grad", t.grad, n * grad_size, grad_size, true},
        {"exp_avg", t.exp_avg, n * 4, 4, true},
        {"exp_avg_sq", t.exp_avg_sq, second_floats * 4, 4, true},
        {"master", t.master, n * 4, 4, false},
    };
    for (const Buffer& b : buffers) {
      if (b.pointer == nullptr) {
        if (!b.required) continue;
        return Status::invalid(named(b.field) + " must not be NULL" +
                               (std::string(b.field) == "exp_avg_sq" && tdclm
                                    ? " (in TD-CLM it holds the second-moment factors)"
                                    : ""));
      }
      const auto address = reinterpret_cast<uintptr_t>(b.pointer);
      if (address % b.alignment != 0) {
        return Status::invalid(named(b.field) + " must be aligned to " +
                               std::to_string(b.alignment) + " bytes (got " +
                               hex_address(address) + ")");
      }
      if (address > std::numeric_limits<uintptr_t>::max() - b.bytes) {
        return Status::invalid(named(b.field) + " range wraps around the address space");
      }
      if (note_grads && &b == &buffers[1]) memo->grad_at[ti] = static_cast<uint32_t>(ranges.size());
      ranges.push_back({address, address + b.bytes, kNoIndex, several ? ti : kNoIndex, b.field});
    }
  }

  if (scratch != nullptr) {
    const size_t needed = scratch_bytes_for_tensors(tensors);
    if (scratch_bytes < needed) {
      return Status::invalid("scratch is too small: " + std::to_string(needed) +
                             " bytes needed (luminav_scratch_bytes), got " +
                             std::to_string(scratch_bytes));
    }
    const auto address = reinterpret_cast<uintptr_t>(scratch);
    if (address % alignof(double) != 0) {
      return Status::invalid("scratch must be aligned to 8 bytes (got " + hex_address(address) + ")");
    }
    if (address > std::numeric_limits<uintptr_t>::max() - scratch_bytes) {
      return Status::invalid("scratch range wraps around the address space");
    }
    ranges.push_back({address, address + scratch_bytes, kNoIndex, kNoIndex, "scratch"});
  }

  if (memo != nullptr) memo->last_ranges = ranges.size();
  return check_no_overlap(ranges, memo);
}

// Positions sorted by (begin, position): a total order, so the memo's merge
// and a full sort agree exactly (Note [overlap check memo]).
struct ByBeginThenPosition {
  const std::vector<ByteRange>& ranges;
  bool operator()(uint32_t a, uint32_t b) const {
    return ranges[a].begin < ranges[b].begin || (ranges[a].begin == ranges[b].begin && a < b);
  }
};

void sort_positions(const std::vector<ByteRange>& ranges, std::vector<uint32_t>& positions) {
  std::sort(positions.begin(), positions.end(), ByBeginThenPosition{ranges});
}

// The positions of `ranges` sorted by (begin, position), through the memo
// when it holds the previous call of the same size; the memo then holds this call.
const std::vector<uint32_t>& sorted_positions(const std::vector<ByteRange>& ranges, OverlapMemo& memo) {
  const size_t n = ranges.size();
  const auto same = [&](uint32_t i) { return memo.begins[i] == ranges[i].begin && memo.ends[i] == ranges[i].end; };
  if (memo.order.size() == n && memo.begins.size() == n) {
    memo.kept.clear();
    memo.moved.clear();
    for (uint32_t i : memo.order) {
      if (same(i)) memo.kept.push_back(i);
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (!same(i)) memo.moved.push_back(i);
    }
    if (!memo.moved.empty()) {
      sort_positions(ranges, memo.moved);
      std::merge(memo.kept.begin(), memo.kept.end(), memo.moved.begin(), memo.moved.end(), memo.order.begin(),
                 ByBeginThenPosition{ranges});
    }
  } else {
    memo.order.resize(n);
    for (uint32_t i = 0; i < n; ++i) memo.order[i] = i;
    sort_positions(ranges, memo.order);
  }
  memo.begins.resize(n);
  memo.ends.resize(n);
  for (size_t i = 0; i < n; ++i) {
    memo.begins[i] = ranges[i].begin;
    memo.ends[i] = ranges[i].end;
  }
  return memo.order;
}

// Note [overlap check]: sorted by start, a range overlaps an earlier one
// iff it starts before the furthest end seen so far.
Status check_no_overlap(const std::vector<ByteRange>& ranges, OverlapMemo* memo) {
  if (ranges.size() < 2) return Status::success();
  thread_local OverlapMemo unmemoized;  // its order only: small calls sort in full
  if (memo == nullptr || ranges.size() < kMemoMinRanges) {
    memo = &unmemoized;
    memo->begins.clear();
  }
  const std::vector<uint32_t>& order = sorted_positions(ranges, *memo);
  const ByteRange* furthest = &ranges[order[0]];
  for (size_t j = 1; j < order.size(); ++j) {
    const ByteRange& r = ranges[order[j]];
    if (r.begin < furthest->end) {
      return Status::invalid("buffers overlap: " + name_of(*furthest) + " [" + hex_address(furthest->begin) + ", " +
                             hex_address(furthest->end) + ") and " + name_of(r) + " [" + hex_address(r.begin) +
                             ", " + hex_address(r.end) + ")");
    }
    if (r.end > furthest->end) furthest = &r;
  }
  return Status::success();
}
}  // namespace

Status validate_groups(std::span<const luminav_group> groups) {
  // One memo per group and one for the ranges across groups (Note [overlap check memo]).
  thread_local std::vector<OverlapMemo> group_memos;
  thread_local OverlapMemo across_memo;
  thread_local std::vector<ByteRange> across;
  if (group_memos.size() < groups.size()) group_memos.resize(groups.size());
  std::vector<ByteRange>& ranges = across;
  ranges.clear();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const luminav_group& g = groups[gi];
    const std::string prefix = "groups[" + std::to_string(gi) + "].";
    if (g.hp == nullptr) return Status::invalid(prefix + "hp must not be NULL");
    if (g.tensors == nullptr && g.count > 0) return Status::invalid(prefix + "tensors must not be NULL");
    if (g.lr != nullptr && g.lr_dtype != LUMINAV_SCALAR_F32 && g.lr_dtype != LUMINAV_SCALAR_F64) {
      return Status::invalid(prefix + "lr_dtype must be 0 (f32) or 1 (f64) (got " + std::to_string(g.lr_dtype) +
                             ")");
    }
    Status s = validate_hyperparams(g.hp);
    if (s.ok()) s = validate_tensors_into(*g.hp, std::span(g.tensors, g.count), nullptr, 0, &group_memos[gi]);
    if (!s.ok()) {
      s.message = prefix + s.message;
      return s;
    }
    if (groups.size() < 2) break;
    // Within a group validate_tensors saw every overlap; across groups only
    // this does (the same byte ranges, named by group).
    for (size_t ti = 0; ti < g.count; ++ti) {
      const luminav_tensor& t = g.tensors[ti];
      const size_t n = t.num_elements;
      if (n == 0) continue;
      auto add = [&](const void* p, size_t bytes, const char* field) {
        if (p == nullptr) return;
        const auto a = reinterpret_cast<uintptr_t>(p);
        ranges.push_back({a, a + bytes, gi, ti, field});
      };
      add(t.param, n * dtype_size(t.param_dtype), "param");
      add(t.grad, n * dtype_size(t.grad_dtype), "grad");
      add(t.exp_avg, n * 4, "exp_avg");
      add(t.exp_avg_sq, exp_avg_sq_length(n, t.rows, g.hp->buffer_mode, t.td_factor) * 4, "exp_avg_sq");
      add(t.master, n * 4, "master");
    }
  }
  return check_no_overlap(ranges, &across_memo);
}

}  // namespace luminav::core
