// One tensor's pass-1 partials as the float64s a sharded step all-reduces
// (luminav_step_groups_sharded): one record per tensor, shared by the host
// driver and the device kernels so that both read and write the same layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/host_device.h"

namespace luminav::core {

// Note [exchange record]: the counts travel as float64, exact below 2^53
// elements, so one SUM all-reduce of one float64 buffer carries them with
// the sums. `elements` adds up to the logical N (a check on the caller's
// shard layouts). Record order: the luminav_partials fields, then elements.
inline constexpr size_t kExchangeRecordDoubles = 8;
// The buffer opens with a header: [0] a found_inf flag (any rank's), then
// padding to the first record.
inline constexpr size_t kExchangeHeaderDoubles = 2;

LUMINAV_HD void store_exchange_record(const luminav_partials& p, uint64_t elements, double* r) {
  r[0] = static_cast<double>(p.nonfinite_count);
  r[1] = static_cast<double>(p.agree_count);
  r[2] = p.grad_sq_sum;
  r[3] = p.update_sq_sum;
  r[4] = p.weight_sq_sum;
  r[5] = p.row_factor_sum;
  r[6] = static_cast<double>(p.row_count);
  r[7] = static_cast<double>(elements);
}

LUMINAV_HD luminav_partials load_exchange_record(const double* r) {
  luminav_partials p{};
  p.nonfinite_count = static_cast<uint64_t>(r[0]);
  p.agree_count = static_cast<uint64_t>(r[1]);
  p.grad_sq_sum = r[2];
  p.update_sq_sum = r[3];
  p.weight_sq_sum = r[4];
  p.row_factor_sum = r[5];
  p.row_count = static_cast<uint64_t>(r[6]);
  return p;
}

LUMINAV_HD uint64_t exchange_record_elements(const double* r) { return static_cast<uint64_t>(r[7]); }

}  // namespace luminav::core
