// luminav_step, luminav_step_multi, the sharded split and the scratch size.
#include "luminav/luminav.h"
#include "optim/capi/error_boundary.h"
#include "optim/capi/export.h"
#include "optim/capi/single_tensor.h"
#include "optim/core/reduction_tile.h"
#include "optim/core/second_moment_layout.h"
#include "optim/dispatch/step_driver.h"

using luminav::capi::guarded;
namespace dispatch = luminav::dispatch;

LUMINAV_EXPORT void luminav_hyperparams_init(luminav_hyperparams* hp) {
  if (hp == nullptr) return;
  *hp = luminav_hyperparams{};
  hp->lr = 1e-3;
  hp->beta1 = 0.9;
  hp->beta2 = 0.999;
  hp->eps = 1e-8;
  hp->weight_decay = 0.01;
  hp->tau = 0.0;
  hp->lam = 0.0;
  hp->bound_ratio = 0.0;
  hp->buffer_mode = LUMINAV_MODE_CLM;
  hp->cautious = 0;
  hp->bound_mode = LUMINAV_BOUND_NONE;
  hp->check_finite = 1;
  hp->stochastic_rounding = 1;
  hp->step = 1;
  hp->grad_scale = 1.0;
}

LUMINAV_EXPORT size_t luminav_exp_avg_sq_length(uint64_t num_elements, uint64_t rows,
                                                int buffer_mode, int td_factor) {
  return luminav::core::exp_avg_sq_length(num_elements, rows, buffer_mode, td_factor);
}

LUMINAV_EXPORT size_t luminav_scratch_bytes(size_t num_elements) {
  return luminav::core::scratch_bytes_for(num_elements);
}

LUMINAV_EXPORT int luminav_step(const luminav_hyperparams* hp, const luminav_tensor* tensor,
                                const luminav_options* options) {
  return guarded([&] {
    if (tensor == nullptr) return luminav::core::Status::invalid("tensor must not be NULL");
    return dispatch::run_step(hp, tensor, 1, options);
  });
}

namespace {

int step_sixteen_bit(int dtype, const luminav_hyperparams* hp, uint16_t* param,
                     const uint16_t* grad, float* exp_avg, float* exp_avg_sq, float* master,
                     size_t num_elements, uint64_t seed, const luminav_options* options) {
  const luminav_tensor tensor = luminav::capi::single_tensor(param, grad, exp_avg, exp_avg_sq, master,
                                                             num_elements, seed, dtype);
  return guarded([&] { return dispatch::run_step(hp, &tensor, 1, options); });
}

}  // namespace

LUMINAV_EXPORT int luminav_step_bf16(const luminav_hyperparams* hp, uint16_t* param,
                                     const uint16_t* grad, float* exp_avg, float* exp_avg_sq,
                                     float* master, size_t num_elements, uint64_t seed,
                                     const luminav_options* options) {
  return step_sixteen_bit(LUMINAV_DTYPE_BF16, hp, param, grad, exp_avg, exp_avg_sq, master,
                          num_elements, seed, options);
}

LUMINAV_EXPORT int luminav_step_f16(const luminav_hyperparams* hp, uint16_t* param,
                                    const uint16_t* grad, float* exp_avg, float* exp_avg_sq,
                                    float* master, size_t num_elements, uint64_t seed,
                                    const luminav_options* options) {
  return step_sixteen_bit(LUMINAV_DTYPE_F16, hp, param, grad, exp_avg, exp_avg_sq, master,
                          num_elements, seed, options);
}

LUMINAV_EXPORT int luminav_step_multi(const luminav_hyperparams* hp,
                                      const luminav_tensor* tensors, size_t count,
                                      const luminav_options* options) {
  return guarded([&] { return dispatch::run_step(hp, tensors, count, options); });
}

LUMINAV_EXPORT int luminav_reduction_rounds(const luminav_hyperparams* hp) {
  int rounds = 0;
  const int code = guarded([&] { return dispatch::run_reduction_rounds(hp, &rounds); });
  return code == LUMINAV_STATUS_OK ? rounds : -code;
}

LUMINAV_EXPORT int luminav_reduce(const luminav_hyperparams* hp, const luminav_tensor* shard,
                                  int round, const luminav_globals* globals,
                                  luminav_partials* out, const luminav_options* options) {
  return guarded([&] { return dispatch::run_reduce(hp, shard, round, globals, nullptr, out, options); });
}

LUMINAV_EXPORT int luminav_reduce_with_factors(const luminav_hyperparams* hp,
                                               const luminav_tensor* shard, int round,
                                               const luminav_globals* globals,
                                               const luminav_factor_sums* factor_sums,
                                               luminav_partials* out,
                                               const luminav_options* options) {
  return guarded([&] {
    return dispatch::run_reduce(hp, shard, round, globals, factor_sums, out, options);
  });
}

LUMINAV_EXPORT int luminav_finalize(const luminav_hyperparams* hp,
                                    const luminav_partials* global_sum,
                                    uint64_t logical_num_elements, int round, float s_old,
                                    luminav_globals* inout) {
  return guarded([&] {
    return dispatch::run_finalize(hp, global_sum, logical_num_elements, round, s_old, inout);
  });
}

LUMINAV_EXPORT int luminav_apply(const luminav_hyperparams* hp, const luminav_tensor* shard,
                                 const luminav_globals* globals, const luminav_options* options) {
  return guarded([&] { return dispatch::run_apply(hp, shard, globals, nullptr, options); });
}

LUMINAV_EXPORT int luminav_apply_with_factors(const luminav_hyperparams* hp,
                                              const luminav_tensor* shard,
                                              const luminav_globals* globals,
                                              const luminav_factor_sums* factor_sums,
                                              const luminav_options* options) {
  return guarded([&] { return dispatch::run_apply(hp, shard, globals, factor_sums, options); });
}
