// Throughput of the scalar reference backend against the memory floor: a
// memcpy moving the same bytes a step must move, in the same run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "luminav/luminav.h"

namespace {

struct Buffers {
  std::vector<float> param, grad, m, v, master;
  std::vector<uint16_t> param16;
  explicit Buffers(size_t n)
      : param(n, 0.5f), grad(n, 0.01f), m(n, 0.001f), v(n, 1e-4f), master(n, 0.5f), param16(n, 0x3f00) {}
};

// Bytes one step moves at the least: every buffer read once and the state
// written once (CLM f32: grad, param, m, v read; param, m, v written).
void BM_MemoryFloor(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const size_t bytes = 28 * n;  // 16 B read + 12 B written per element
  std::vector<char> src(bytes / 2), dst(bytes / 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

// range(1): 0 CLM defaults (finite check: one read-only round + apply);
// 1 TD-CLM + cautious + tensor bound (two rounds + apply); 2 CLM bf16 param
// with fp32 master and stochastic rounding.
void BM_ScalarStep(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const int variant = static_cast<int>(state.range(1));
  Buffers b(n);
  float s = 1e-4f;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  luminav_tensor t{};
  t.param = b.param.data();
  t.grad = b.grad.data();
  t.exp_avg = b.m.data();
  t.exp_avg_sq = b.v.data();
  t.num_elements = n;
  if (variant == 1) {
    hp.buffer_mode = LUMINAV_MODE_TDCLM;
    hp.cautious = 1;
    hp.bound_mode = LUMINAV_BOUND_TENSOR;
    hp.bound_ratio = 0.01;
    t.exp_avg_sq = &s;
  } else if (variant == 2) {
    t.param = b.param16.data();
    t.param_dtype = LUMINAV_DTYPE_BF16;
    t.master = b.master.data();
  }
  luminav_options options{};
  options.backend = "scalar";
  for (auto _ : state) {
    ++hp.step;
    if (luminav_step(&hp, &t, &options) != LUMINAV_STATUS_OK) {
      state.SkipWithError(luminav_last_error_message());
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(28 * n));
}

BENCHMARK(BM_MemoryFloor)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ScalarStep)
    ->Args({1 << 22, 0})
    ->Args({1 << 22, 1})
    ->Args({1 << 22, 2})
    ->Args({1 << 14, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
