// luminav_step_groups and its workspace size (luminav_groups.h).
#include "luminav/luminav.h"
#include "optim/capi/error_boundary.h"
#include "optim/capi/export.h"
#include "optim/dispatch/step_driver.h"

using luminav::capi::guarded;
namespace dispatch = luminav::dispatch;

LUMINAV_EXPORT size_t luminav_groups_workspace_bytes(const luminav_group* groups, size_t count) {
  try {
    return dispatch::groups_workspace_bytes(groups, count);
  } catch (...) {
    return 0;
  }
}

LUMINAV_EXPORT int luminav_step_groups(const luminav_group* groups, size_t count,
                                       const luminav_options* options, const luminav_async* async) {
  return guarded([&] { return dispatch::run_step_groups(groups, count, options, async); });
}

LUMINAV_EXPORT int luminav_step_groups_enqueue(const luminav_group* groups, size_t count,
                                               const luminav_options* options, const luminav_async* async) {
  return guarded([&] { return dispatch::run_step_groups(groups, count, options, async, true); });
}

LUMINAV_EXPORT int luminav_synchronize(const luminav_options* options) {
  return guarded([&] { return dispatch::run_synchronize(options); });
}

LUMINAV_EXPORT int luminav_sharded_exchanges(const luminav_group* groups, size_t count) {
  try {
    return dispatch::sharded_exchanges(groups, count);
  } catch (...) {
    return -LUMINAV_STATUS_INTERNAL;
  }
}

LUMINAV_EXPORT size_t luminav_sharded_exchange_doubles(const luminav_group* groups, size_t count,
                                                       const luminav_shard_layout* shards) {
  try {
    return dispatch::sharded_exchange_doubles(groups, count, shards);
  } catch (...) {
    return 0;
  }
}

LUMINAV_EXPORT size_t luminav_sharded_workspace_bytes(const luminav_group* groups, size_t count,
                                                      const luminav_shard_layout* shards) {
  try {
    return dispatch::sharded_workspace_bytes(groups, count, shards);
  } catch (...) {
    return 0;
  }
}

LUMINAV_EXPORT int luminav_step_groups_sharded(const luminav_group* groups, size_t count,
                                               const luminav_shard_layout* shards, const luminav_options* options,
                                               const luminav_async* async, int phase, double* exchange) {
  return guarded([&] {
    return dispatch::run_step_groups_sharded(groups, count, shards, options, async, phase, exchange);
  });
}
