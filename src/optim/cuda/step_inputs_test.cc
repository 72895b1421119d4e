// step_inputs (Note [a step seen before]): equal inputs give equal bytes
// whatever the structs' padding holds, and each input that shapes a launch
// changes them.
#include "optim/cuda/step_inputs.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <new>
#include <vector>

namespace luminav::cuda {
namespace {

// One group of two tensors and its call, built on memory first filled with `fill` (the padding).
struct Call {
  alignas(16) unsigned char tensor_bytes[2 * sizeof(luminav_tensor)];
  alignas(16) unsigned char constants_bytes[sizeof(core::StepConstants)];
  alignas(16) unsigned char async_bytes[sizeof(luminav_async)];
  luminav_tensor* tensors;
  core::StepConstants* k;
  luminav_async* async;
  uint32_t positions[2] = {0, 1};
  ExecContext ctx;
  float* step_counter = reinterpret_cast<float*>(0x7000);  // device scalars: addresses only
  const void* lr = nullptr;

  explicit Call(unsigned char fill) {
    std::memset(tensor_bytes, fill, sizeof tensor_bytes);
    std::memset(constants_bytes, fill, sizeof constants_bytes);
    std::memset(async_bytes, fill, sizeof async_bytes);
    tensors = new (tensor_bytes) luminav_tensor[2];
    k = new (constants_bytes) core::StepConstants;
    async = new (async_bytes) luminav_async;
    for (int i = 0; i < 2; ++i) {
      luminav_tensor& t = tensors[i];
      t.param = reinterpret_cast<void*>(0x1000 + 0x100 * i);
      t.grad = reinterpret_cast<const void*>(0x2000 + 0x100 * i);
      t.exp_avg = reinterpret_cast<float*>(0x3000 + 0x100 * i);
      t.exp_avg_sq = reinterpret_cast<float*>(0x4000 + 0x100 * i);
      t.master = nullptr;
      t.num_elements = 64;
      t.index_offset = 0;
      t.seed = 7 + i;
      t.param_dtype = LUMINAV_DTYPE_F32;
      t.grad_dtype = LUMINAV_DTYPE_F32;
      t.rows = 8;
      t.td_factor = 0;
    }
    k->lr = 1e-3f;
    k->beta1 = 0.9f;
    k->one_minus_beta1 = 0.1f;
    k->beta2 = 0.95f;
    k->one_minus_beta2 = 0.05f;
    k->eps = 1e-8f;
    k->decay_factor = 1.0f;
    k->inv_bias_correction1 = k->inv_bias_correction2 = 1.0f;
    k->lam = 0.0f;
    k->one_minus_lam = 1.0f;
    k->tau = k->bound_ratio = 0.0f;
    k->inv_grad_scale = 1.0f;
    k->tdclm = k->cautious = k->bound_mode = k->grad_sq_wanted = k->stochastic_rounding = 0;
    k->check_finite = 1;
    k->step = 1;
    async->status = reinterpret_cast<luminav_step_status*>(0x5000);
    async->host_status = nullptr;
    async->grad_scale = nullptr;
    async->found_inf = nullptr;
    async->skip_nonfinite = 0;
    ctx.device_index = 0;
    ctx.scratch = reinterpret_cast<void*>(0x6000);
  }
  std::vector<unsigned char> bytes() const {
    AsyncGroup g{};
    g.k = *k;
    g.tensors = std::span<const luminav_tensor>(tensors, 2);
    g.positions = positions;
    g.step_counter = step_counter;
    g.lr = lr;
    g.lr_dtype = 0;
    g.lr_host = 1e-3;
    g.beta1 = 0.9;
    g.beta2 = 0.95;
    g.weight_decay = 0.0;
    std::vector<unsigned char> out;
    step_inputs(std::span<const AsyncGroup>(&g, 1), *async, ctx, &out);
    return out;
  }
};

TEST(StepInputs, EqualInputsGiveEqualBytesWhateverThePadding) {
  EXPECT_EQ(Call(0x00).bytes(), Call(0xAB).bytes());
  EXPECT_EQ(Call(0x00).bytes(), Call(0x00).bytes());
}

TEST(StepInputs, EveryInputThatShapesALaunchChangesTheBytes) {
  const std::vector<unsigned char> base = Call(0).bytes();
  const std::vector<std::pair<const char*, std::function<void(Call&)>>> changes = {
      {"a gradient's address", [](Call& c) { c.tensors[1].grad = reinterpret_cast<const void*>(0x9000); }},
      {"a parameter's address", [](Call& c) { c.tensors[0].param = reinterpret_cast<void*>(0x9000); }},
      {"a master buffer", [](Call& c) { c.tensors[0].master = reinterpret_cast<float*>(0x9000); }},
      {"a tensor's size", [](Call& c) { c.tensors[0].num_elements = 128; }},
      {"a tensor's rows", [](Call& c) { c.tensors[0].rows = 16; }},
      {"the factor kind", [](Call& c) { c.tensors[1].td_factor = 1; }},
      {"a dtype", [](Call& c) { c.tensors[1].grad_dtype = LUMINAV_DTYPE_BF16; }},
      {"a seed", [](Call& c) { c.tensors[0].seed = 99; }},
      {"the lr constant", [](Call& c) { c.k->lr = 2e-3f; }},
      {"the host step", [](Call& c) { c.k->step = 2; }},
      {"the mode", [](Call& c) { c.k->tdclm = 1; }},
      {"a position", [](Call& c) { c.positions[1] = 5; }},
      {"the device step counter", [](Call& c) { c.step_counter = reinterpret_cast<float*>(0x9000); }},
      {"a device lr", [](Call& c) { c.lr = reinterpret_cast<const void*>(0x9000); }},
      {"GradScaler's found_inf", [](Call& c) { c.async->found_inf = reinterpret_cast<float*>(0x9000); }},
      {"skip_nonfinite", [](Call& c) { c.async->skip_nonfinite = 1; }},
      {"the workspace", [](Call& c) { c.ctx.scratch = reinterpret_cast<void*>(0x9000); }},
      {"the device", [](Call& c) { c.ctx.device_index = 1; }},
  };
  for (const auto& [what, change] : changes) {
    Call c(0);
    change(c);
    EXPECT_NE(c.bytes(), base) << what;
  }
}

}  // namespace
}  // namespace luminav::cuda
