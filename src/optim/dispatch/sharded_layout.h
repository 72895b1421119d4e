// Where a sharded whole step (luminav_step_groups_sharded) keeps its
// numbers: the exchange buffer the caller all-reduces and the workspace that
// carries the globals between phases. Shared by the host driver and the
// device backends, so that both carve the same buffers the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "luminav/luminav.h"
#include "optim/core/exchange_record.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/step_constants.h"
#include "optim/dispatch/async_workspace.h"

namespace luminav::dispatch {

inline constexpr size_t kNoSums = static_cast<size_t>(-1);

// One tensor (shard) of the call, in call order (group by group).
struct ShardedTensor {
  size_t group = 0, index = 0;  // groups[group].tensors[index]
  uint32_t position = 0;        // its position in the call (status word, from 0)
  core::MomentLayout local;     // of this shard (kElementwise when it has no elements)
  size_t record = 0;            // float64 offset of its exchange record
  size_t columns = 0;           // float64 offset of its column sums in the exchange (factored), else 0
  uint64_t cols = 0;            // C of the logical tensor where `columns` is set
  size_t sums = kNoSums;        // byte offset in the workspace: local row sums, then C column sums
};

struct ShardedLayout {
  std::vector<ShardedTensor> tensors;
  size_t exchange_doubles = 0;
  size_t words = 0;    // AsyncStepWords (byte offsets from here on)
  size_t globals = 0;  // one core::TensorGlobals per tensor of the call
  size_t workspace_bytes = 0;
};

// The logical tensor's layout (the caller's luminav_shard_layout).
inline core::MomentLayout logical_layout(bool tdclm, const luminav_tensor& t, const luminav_shard_layout& s) {
  luminav_tensor logical = t;
  logical.num_elements = s.logical_num_elements;
  logical.rows = s.logical_rows;
  if (s.logical_num_elements == 0) return core::MomentLayout{};
  return core::moment_layout(tdclm, logical);
}

// From the modes and logical shapes (the exchange: equal on every rank) and
// the local shapes (the workspace). Arguments validated by the caller.
inline ShardedLayout sharded_layout(std::span<const luminav_group> groups, const luminav_shard_layout* shards) {
  auto align = [](size_t n) { return (n + 255) & ~size_t{255}; };
  ShardedLayout l;
  size_t t = 0, columns = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const bool tdclm = groups[gi].hp->buffer_mode == LUMINAV_MODE_TDCLM;
    for (size_t i = 0; i < groups[gi].count; ++i, ++t) {
      const luminav_tensor& x = groups[gi].tensors[i];
      ShardedTensor s;
      s.group = gi;
      s.index = i;
      s.position = static_cast<uint32_t>(t);
      s.record = core::kExchangeHeaderDoubles + t * core::kExchangeRecordDoubles;
      const core::MomentLayout logical = logical_layout(tdclm, x, shards[t]);
      if (logical.kind == core::SecondMoment::kFactored) {
        s.cols = logical.cols;
        s.columns = columns;  // relative until the records' end is known
        columns += logical.cols;
      }
      if (x.num_elements > 0) s.local = core::moment_layout(tdclm, x);
      l.tensors.push_back(s);
    }
  }
  const size_t records_end = core::kExchangeHeaderDoubles + t * core::kExchangeRecordDoubles;
  for (ShardedTensor& s : l.tensors) {
    if (s.cols > 0) s.columns += records_end;
  }
  l.exchange_doubles = records_end + columns;
  l.words = 0;
  l.globals = align(sizeof(AsyncStepWords));
  size_t at = l.globals + align(t * sizeof(core::TensorGlobals));
  for (ShardedTensor& s : l.tensors) {
    if (!core::has_row_factor(s.local)) continue;
    s.sums = at;
    const size_t cols = s.local.kind == core::SecondMoment::kFactored ? s.local.cols : 0;
    at += ((s.local.rows + cols) * sizeof(double) + 15) & ~size_t{15};
  }
  l.workspace_bytes = align(at);
  return l;
}

}  // namespace luminav::dispatch
