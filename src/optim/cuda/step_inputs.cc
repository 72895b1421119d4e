// step_inputs (Note [a step seen before] in step_graph_cache.h).
#include "optim/cuda/step_inputs.h"

#include <cstddef>
#include <type_traits>

namespace luminav::cuda {
namespace {

class Bytes {
 public:
  explicit Bytes(std::vector<unsigned char>* out) : out_(out) { out_->clear(); }
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_class_v<T>, "one field at a time");
    const auto* b = reinterpret_cast<const unsigned char*>(&value);
    out_->insert(out_->end(), b, b + sizeof value);
  }
  void put_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    out_->insert(out_->end(), b, b + n);
  }

 private:
  std::vector<unsigned char>* out_;
};

// A field added to either struct must be added below too (these sizes say when).
static_assert(sizeof(core::StepConstants) == 14 * sizeof(float) + 6 * sizeof(int) + sizeof(uint64_t),
              "StepConstants changed: update put_constants");
static_assert(sizeof(luminav_tensor) == 88, "luminav_tensor changed: update put_tensor");

void put_constants(Bytes& b, const core::StepConstants& k) {
  for (float v : {k.lr, k.beta1, k.one_minus_beta1, k.beta2, k.one_minus_beta2, k.eps, k.decay_factor,
                  k.inv_bias_correction1, k.inv_bias_correction2, k.lam, k.one_minus_lam, k.tau, k.bound_ratio,
                  k.inv_grad_scale}) {
    b.put(v);
  }
  for (int v : {k.tdclm, k.cautious, k.bound_mode, k.check_finite, k.grad_sq_wanted, k.stochastic_rounding}) b.put(v);
  b.put(k.step);
}

void put_tensor(Bytes& b, const luminav_tensor& t) {
  b.put(t.param);
  b.put(t.grad);
  b.put(t.exp_avg);
  b.put(t.exp_avg_sq);
  b.put(t.master);
  b.put(t.num_elements);
  b.put(t.index_offset);
  b.put(t.seed);
  b.put(t.param_dtype);
  b.put(t.grad_dtype);
  b.put(t.rows);
  b.put(t.td_factor);
}

}  // namespace

void step_inputs(std::span<const AsyncGroup> groups, const luminav_async& async, const ExecContext& ctx,
                 std::vector<unsigned char>* out) {
  Bytes b(out);
  b.put(ctx.device_index);
  b.put(ctx.scratch);
  b.put(async.status);
  b.put(async.host_status);
  b.put(async.grad_scale);
  b.put(async.found_inf);
  b.put(async.skip_nonfinite);
  b.put(groups.size());
  for (const AsyncGroup& g : groups) {
    put_constants(b, g.k);
    b.put(g.tensors.size());
    for (const luminav_tensor& t : g.tensors) put_tensor(b, t);
    b.put(g.positions.size());
    b.put_bytes(g.positions.data(), g.positions.size_bytes());
    b.put(g.step_counter);
    b.put(g.lr);
    b.put(g.lr_dtype);
    b.put(g.lr_host);
    b.put(g.beta1);
    b.put(g.beta2);
    b.put(g.weight_decay);
  }
}

}  // namespace luminav::cuda
