// Every row of the spec's error table through the C API: the right status,
// a message naming the parameter (and its value), and every buffer
// byte-identical to before the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "luminav/luminav.h"
#include "luminav/luminav_groups.h"

namespace {

// Three tensors of mixed dtypes in one arena, so that a test can point a
// buffer into another's range.
struct Fixture {
  static constexpr size_t kN = 64;
  std::vector<float> param32 = std::vector<float>(kN), grad32 = std::vector<float>(kN),
                     m = std::vector<float>(kN), v = std::vector<float>(kN),
                     master = std::vector<float>(kN), m2 = std::vector<float>(kN),
                     v2 = std::vector<float>(kN), m3 = std::vector<float>(kN);
  std::vector<uint16_t> param16 = std::vector<uint16_t>(kN), grad16 = std::vector<uint16_t>(kN),
                        param16b = std::vector<uint16_t>(kN);
  float s3 = 0.5f;
  luminav_hyperparams hp;
  luminav_tensor t[3];

  Fixture() {
    for (size_t i = 0; i < kN; ++i) {
      param32[i] = 0.01f * static_cast<float>(i) - 0.3f;
      grad32[i] = 0.02f - 0.001f * static_cast<float>(i);
      m[i] = m2[i] = m3[i] = 0.001f * static_cast<float>(i);
      v[i] = v2[i] = 0.0001f;
      master[i] = param32[i];
      param16[i] = static_cast<uint16_t>(0x3c00 + i);  // f16 around 1
      grad16[i] = static_cast<uint16_t>(0x3f80 + i);   // bf16 around 1
      param16b[i] = static_cast<uint16_t>(0x3f00 + i);
    }
    luminav_hyperparams_init(&hp);
    hp.step = 2;
    t[0] = luminav_tensor{};
    t[0].param = param32.data();
    t[0].grad = grad32.data();
    t[0].exp_avg = m.data();
    t[0].exp_avg_sq = v.data();
    t[0].master = master.data();
    t[0].num_elements = kN;
    t[1] = luminav_tensor{};
    t[1].param = param16.data();
    t[1].grad = grad16.data();
    t[1].exp_avg = m2.data();
    t[1].exp_avg_sq = v2.data();
    t[1].num_elements = kN;
    t[1].param_dtype = LUMINAV_DTYPE_F16;
    t[1].grad_dtype = LUMINAV_DTYPE_BF16;
    t[2] = luminav_tensor{};
    t[2].param = param16b.data();
    t[2].grad = grad32.data() + 0;  // replaced below: own gradient
    t[2].exp_avg = m3.data();
    t[2].exp_avg_sq = v.data();     // replaced below
    t[2].num_elements = kN;
    t[2].param_dtype = LUMINAV_DTYPE_BF16;
    own_grad3.assign(kN, 0.01f);
    own_v3.assign(kN, 0.0002f);
    t[2].grad = own_grad3.data();
    t[2].exp_avg_sq = own_v3.data();
    // The TD-CLM rows below are version 1's scalar s (td_factor rows: their own tests).
    for (luminav_tensor& each : t) each.td_factor = LUMINAV_TD_TENSOR;
  }
  std::vector<float> own_grad3, own_v3;

  // Every byte of every buffer.
  std::vector<unsigned char> snapshot() const {
    std::vector<unsigned char> bytes;
    auto add = [&](const void* p, size_t n) {
      const auto* c = static_cast<const unsigned char*>(p);
      bytes.insert(bytes.end(), c, c + n);
    };
    for (const auto* f : {&param32, &grad32, &m, &v, &master, &m2, &v2, &m3, &own_grad3, &own_v3})
      add(f->data(), f->size() * 4);
    for (const auto* h : {&param16, &grad16, &param16b}) add(h->data(), h->size() * 2);
    add(&s3, 4);
    return bytes;
  }
};

struct Row {
  const char* what;
  std::function<void(Fixture&)> change;
  int expected_status;
  std::vector<std::string> message_has;
  size_t tensors = 1;  // 1: luminav_step on t[0], else step_multi on t[0..n)
  luminav_options options{};
  bool use_options = false;
};

void run_row(const Row& row) {
  Fixture f;
  row.change(f);
  const auto before = f.snapshot();
  const luminav_options* options = row.use_options ? &row.options : nullptr;
  const int status = row.tensors == 1 ? luminav_step(&f.hp, &f.t[0], options)
                                      : luminav_step_multi(&f.hp, f.t, row.tensors, options);
  EXPECT_EQ(status, row.expected_status)
      << row.what << ": got " << luminav_status_name(status) << " " << luminav_last_error_message();
  const std::string message = luminav_last_error_message();
  for (const std::string& part : row.message_has) {
    EXPECT_NE(message.find(part), std::string::npos) << row.what << ": message '" << message
                                                     << "' lacks '" << part << "'";
  }
  EXPECT_TRUE(f.snapshot() == before) << row.what << ": a buffer changed";
}

constexpr int kInvalid = LUMINAV_STATUS_INVALID_ARGUMENT;

TEST(ErrorRows, HyperparametersNameTheParameterAndValue) {
  const std::vector<Row> rows = {
      {"lr < 0", [](Fixture& f) { f.hp.lr = -0.1; }, kInvalid, {"lr", "-0.1"}},
      {"lr NaN", [](Fixture& f) { f.hp.lr = NAN; }, kInvalid, {"lr", "nan"}},
      {"lr Inf", [](Fixture& f) { f.hp.lr = INFINITY; }, kInvalid, {"lr", "inf"}},
      {"eps = 0", [](Fixture& f) { f.hp.eps = 0.0; }, kInvalid, {"eps", "(got 0)"}},
      {"eps < 0", [](Fixture& f) { f.hp.eps = -1e-8; }, kInvalid, {"eps", "-1e-08"}},
      {"beta1 = 1", [](Fixture& f) { f.hp.beta1 = 1.0; }, kInvalid, {"beta1", "(got 1)"}},
      {"beta1 < 0", [](Fixture& f) { f.hp.beta1 = -0.5; }, kInvalid, {"beta1", "-0.5"}},
      {"beta2 = 1", [](Fixture& f) { f.hp.beta2 = 1.0; }, kInvalid, {"beta2", "(got 1)"}},
      {"beta2 NaN", [](Fixture& f) { f.hp.beta2 = NAN; }, kInvalid, {"beta2", "nan"}},
      {"lam > 1", [](Fixture& f) { f.hp.lam = 1.5; }, kInvalid, {"lam", "1.5"}},
      {"lam < 0", [](Fixture& f) { f.hp.lam = -0.25; }, kInvalid, {"lam", "-0.25"}},
      {"tau < 0", [](Fixture& f) { f.hp.tau = -2.0; }, kInvalid, {"tau", "-2"}},
      {"weight_decay NaN", [](Fixture& f) { f.hp.weight_decay = NAN; }, kInvalid,
       {"weight_decay", "nan"}},
      {"buffer_mode 3", [](Fixture& f) { f.hp.buffer_mode = 3; }, kInvalid, {"buffer_mode", "3"}},
      {"buffer_mode 0", [](Fixture& f) { f.hp.buffer_mode = 0; }, kInvalid, {"buffer_mode", "0"}},
      {"bound_mode 5", [](Fixture& f) { f.hp.bound_mode = 5; }, kInvalid, {"bound_mode", "5"}},
      {"bound_ratio 0 with tensor bound",
       [](Fixture& f) {
         f.hp.bound_mode = 1;
         f.hp.bound_ratio = 0.0;
       },
       kInvalid, {"bound_ratio", "(got 0)"}},
      {"bound_ratio < 0 with element bound",
       [](Fixture& f) {
         f.hp.bound_mode = 2;
         f.hp.bound_ratio = -0.5;
       },
       kInvalid, {"bound_ratio", "-0.5"}},
      {"bound_ratio NaN", [](Fixture& f) { f.hp.bound_ratio = NAN; }, kInvalid, {"bound_ratio", "nan"}},
      {"step 0", [](Fixture& f) { f.hp.step = 0; }, kInvalid, {"step", "0"}},
      {"cautious 2", [](Fixture& f) { f.hp.cautious = 2; }, kInvalid, {"cautious", "2"}},
      {"check_finite -1", [](Fixture& f) { f.hp.check_finite = -1; }, kInvalid, {"check_finite", "-1"}},
  };
  for (const Row& row : rows) run_row(row);
}

TEST(ErrorRows, BuffersAndDtypes) {
  const std::vector<Row> rows = {
      {"param NULL", [](Fixture& f) { f.t[0].param = nullptr; }, kInvalid, {"param", "NULL"}},
      {"grad NULL", [](Fixture& f) { f.t[0].grad = nullptr; }, kInvalid, {"grad", "NULL"}},
      {"exp_avg NULL", [](Fixture& f) { f.t[0].exp_avg = nullptr; }, kInvalid, {"exp_avg", "NULL"}},
      {"exp_avg_sq NULL (CLM)", [](Fixture& f) { f.t[0].exp_avg_sq = nullptr; }, kInvalid,
       {"exp_avg_sq", "NULL"}},
      {"exp_avg_sq NULL (TD-CLM)",
       [](Fixture& f) {
         f.hp.buffer_mode = LUMINAV_MODE_TDCLM;
         f.t[0].exp_avg_sq = nullptr;
       },
       kInvalid, {"exp_avg_sq", "NULL"}},
      {"param_dtype 9", [](Fixture& f) { f.t[0].param_dtype = 9; }, kInvalid, {"param_dtype", "9"}},
      {"grad_dtype -1", [](Fixture& f) { f.t[0].grad_dtype = -1; }, kInvalid, {"grad_dtype", "-1"}},
      {"misaligned exp_avg",
       [](Fixture& f) { f.t[0].exp_avg = reinterpret_cast<float*>(reinterpret_cast<char*>(f.m.data()) + 2); },
       kInvalid, {"exp_avg", "aligned"}},
      {"a tensor in a multi call with NULL grad", [](Fixture& f) { f.t[2].grad = nullptr; }, kInvalid,
       {"tensors[2].grad", "NULL"}, 3},
      {"null tensor array", [](Fixture&) {}, kInvalid, {"tensors"}, 0},
  };
  for (Row row : rows) {
    if (row.tensors == 0) {  // luminav_step_multi(hp, NULL, 3): the array itself
      Fixture f;
      const auto before = f.snapshot();
      EXPECT_EQ(luminav_step_multi(&f.hp, nullptr, 3, nullptr), kInvalid);
      EXPECT_NE(std::string(luminav_last_error_message()).find("tensors"), std::string::npos);
      EXPECT_TRUE(f.snapshot() == before);
      continue;
    }
    run_row(row);
  }
}

TEST(ErrorRows, OverlappingBuffers) {
  const std::vector<Row> rows = {
      {"grad is param", [](Fixture& f) { f.t[0].grad = f.t[0].param; }, kInvalid, {"overlap", "param", "grad"}},
      {"exp_avg_sq overlaps exp_avg by one element",
       [](Fixture& f) { f.t[0].exp_avg_sq = f.m.data() + Fixture::kN - 1; }, kInvalid,
       {"overlap", "exp_avg"}},
      {"master is exp_avg", [](Fixture& f) { f.t[0].master = f.m.data(); }, kInvalid,
       {"overlap", "master", "exp_avg"}},
      {"TD-CLM scalar inside exp_avg",
       [](Fixture& f) {
         f.hp.buffer_mode = LUMINAV_MODE_TDCLM;
         f.t[0].exp_avg_sq = f.m.data() + 10;
       },
       kInvalid, {"overlap", "exp_avg_sq"}},
      {"f16 param's bytes overlap an f32 buffer (byte ranges from dtype sizes)",
       [](Fixture& f) {
         // 64 f16 = 128 bytes starting 100 bytes before the end of grad's
         // range would overlap; start inside master instead.
         f.t[1].param = reinterpret_cast<char*>(f.master.data()) + 4 * (Fixture::kN - 8);
       },
       kInvalid, {"overlap", "tensors[1].param", "tensors[0].master"}, 3},
      {"two tensors share a gradient", [](Fixture& f) { f.t[2].grad = f.grad32.data(); }, kInvalid,
       {"overlap", "tensors[0].grad", "tensors[2].grad"}, 3},
      {"a tensor's exp_avg is another's exp_avg_sq", [](Fixture& f) { f.t[2].exp_avg_sq = f.m2.data(); },
       kInvalid, {"overlap", "tensors[1].exp_avg", "tensors[2].exp_avg_sq"}, 3},
  };
  for (const Row& row : rows) run_row(row);
}

TEST(ErrorRows, AdjacentBuffersAreFine) {
  // Back-to-back ranges touch but do not overlap.
  std::vector<float> arena(4 * Fixture::kN);
  for (size_t i = 0; i < arena.size(); ++i) arena[i] = 0.001f * static_cast<float>(i % 97) + 1e-3f;
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  luminav_tensor t{};
  t.param = arena.data();
  t.grad = arena.data() + Fixture::kN;
  t.exp_avg = arena.data() + 2 * Fixture::kN;
  t.exp_avg_sq = arena.data() + 3 * Fixture::kN;
  t.num_elements = Fixture::kN;
  EXPECT_EQ(luminav_step(&hp, &t, nullptr), LUMINAV_STATUS_OK) << luminav_last_error_message();
}

TEST(ErrorRows, ScratchTooSmallNamesTheBytesNeeded) {
  alignas(8) static unsigned char scratch[256];
  Row row{"scratch 8 bytes", [](Fixture&) {}, kInvalid, {"scratch", "64"}};
  row.use_options = true;
  row.options.scratch = scratch;
  row.options.scratch_bytes = 8;
  run_row(row);
  // A multi-tensor call needs the sum of the tensors' sizes: 3 * 64.
  Row multi{"scratch for 3 tensors", [](Fixture&) {}, kInvalid, {"scratch", "192"}, 3};
  multi.use_options = true;
  multi.options.scratch = scratch;
  multi.options.scratch_bytes = 128;
  run_row(multi);
  Fixture f;
  luminav_options options{};
  options.scratch = scratch;
  options.scratch_bytes = sizeof scratch;
  EXPECT_EQ(luminav_step_multi(&f.hp, f.t, 3, &options), LUMINAV_STATUS_OK) << luminav_last_error_message();
}

TEST(ErrorRows, NonFiniteGradientWritesNothing) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM}) {
      Row row{"non-finite grad",
              [bad, mode](Fixture& f) {
                f.hp.buffer_mode = mode;
                f.grad32[Fixture::kN - 1] = bad;
              },
              LUMINAV_STATUS_NONFINITE_GRAD, {"non-finite", "1 of 64"}};
      run_row(row);
    }
  }
  // bf16 and f16 gradients: the NaN bit patterns of their own dtype.
  Row bf16{"bf16 NaN grad", [](Fixture& f) { f.t[0] = f.t[1]; f.grad16[5] = 0x7fc0; },
           LUMINAV_STATUS_NONFINITE_GRAD, {"non-finite"}};
  run_row(bf16);
  Row f16{"f16 Inf grad",
          [](Fixture& f) {
            f.t[0] = f.t[1];
            f.t[0].grad_dtype = LUMINAV_DTYPE_F16;
            f.grad16[7] = 0x7c00;
          },
          LUMINAV_STATUS_NONFINITE_GRAD, {"non-finite"}};
  run_row(f16);
}

TEST(ErrorRows, MultiTensorIsAtomicOnANaNInTheLastTensor) {
  for (int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM}) {
    Row row{"NaN in tensors[2]",
            [mode](Fixture& f) {
              f.hp.buffer_mode = mode;
              if (mode == LUMINAV_MODE_TDCLM) {
                f.t[0].exp_avg_sq = f.v.data();
                f.t[1].exp_avg_sq = f.v2.data();
                f.t[2].exp_avg_sq = &f.s3;
              }
              f.own_grad3[Fixture::kN - 1] = NAN;
            },
            LUMINAV_STATUS_NONFINITE_GRAD, {"tensors[2]", "non-finite"}, 3};
    run_row(row);
  }
}

TEST(ErrorRows, FiniteCheckOffLetsNonFiniteThrough) {
  Fixture f;
  f.hp.check_finite = 0;
  f.grad32[0] = NAN;
  EXPECT_EQ(luminav_step(&f.hp, &f.t[0], nullptr), LUMINAV_STATUS_OK);
  EXPECT_TRUE(std::isnan(f.master[0]));
  EXPECT_FALSE(std::isnan(f.master[1]));
}

TEST(ErrorRows, BackendChoice) {
  Row unknown{"unknown backend", [](Fixture&) {}, kInvalid, {"'warp-drive'", "scalar", "simd", "cuda"}};
  unknown.use_options = true;
  unknown.options.backend = "warp-drive";
  run_row(unknown);

  Row memory{"scalar on CUDA memory", [](Fixture&) {}, kInvalid, {"scalar", "device_type"}};
  memory.use_options = true;
  memory.options.backend = "scalar";
  memory.options.device_type = LUMINAV_DEVICE_CUDA;
  run_row(memory);

  Row device{"device_type 7", [](Fixture&) {}, kInvalid, {"device_type", "7"}};
  device.use_options = true;
  device.options.device_type = 7;
  run_row(device);

  // Every known backend that cannot run here is BACKEND_UNAVAILABLE.
  for (const char* name : {"simd", "cuda", "hip", "vulkan"}) {
    bool runs_here = false;
    for (int i = 0; i < luminav_backend_count(); ++i) {
      if (std::string(luminav_backend_name(i)) == name) runs_here = luminav_backend_available(i) != 0;
    }
    if (runs_here) continue;
    Row forced{"forced unavailable backend", [](Fixture&) {}, LUMINAV_STATUS_BACKEND_UNAVAILABLE, {name}};
    forced.use_options = true;
    forced.options.backend = name;
    forced.options.device_type = std::string(name) == "cuda" ? LUMINAV_DEVICE_CUDA
                                 : std::string(name) == "hip" ? LUMINAV_DEVICE_ROCM
                                                              : LUMINAV_DEVICE_CPU;
    run_row(forced);
  }
}

TEST(ErrorRows, ShardedEntryPoints) {
  Fixture f;
  const auto before = f.snapshot();
  luminav_partials out{};
  luminav_globals globals{};
  // CLM with the finite check has one round: round 1 does not exist.
  EXPECT_EQ(luminav_reduce(&f.hp, &f.t[0], 1, &globals, &out, nullptr), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("round"), std::string::npos);
  EXPECT_EQ(luminav_reduce(&f.hp, &f.t[0], 0, nullptr, nullptr, nullptr), kInvalid);
  EXPECT_EQ(luminav_apply(&f.hp, &f.t[0], nullptr, nullptr), kInvalid);
  f.hp.lr = -1;
  EXPECT_EQ(luminav_reduction_rounds(&f.hp), -kInvalid);
  EXPECT_EQ(luminav_finalize(&f.hp, &out, 64, 0, 0.0f, &globals), kInvalid);
  f.hp.lr = 1e-3;
  // A NaN in the all-reduced count fails the finalize of round 0.
  out.nonfinite_count = 3;
  EXPECT_EQ(luminav_finalize(&f.hp, &out, 64, 0, 0.0f, &globals), LUMINAV_STATUS_NONFINITE_GRAD);
  EXPECT_TRUE(f.snapshot() == before);
  // Reduce itself writes nothing, whatever it finds.
  f.grad32[3] = NAN;
  f.hp.cautious = 1;
  const auto with_nan = f.snapshot();
  EXPECT_EQ(luminav_reduce(&f.hp, &f.t[0], 0, nullptr, &out, nullptr), LUMINAV_STATUS_OK);
  EXPECT_EQ(out.nonfinite_count, 1u);
  EXPECT_TRUE(f.snapshot() == with_nan);
}

// Issue 14: TD-CLM's rows and td_factor, shards of whole rows, the gradient
// scale (spec "Errors"). t[0] has 64 elements; v holds 64 floats.
TEST(ErrorRows, TdClmFactorsAndGradScale) {
  auto factored = [](Fixture& f, uint64_t rows) {
    f.hp.buffer_mode = LUMINAV_MODE_TDCLM;
    f.t[0].td_factor = LUMINAV_TD_FACTORED;
    f.t[0].rows = rows;
  };
  const std::vector<Row> rows = {
      {"rows 0 (factored)", [&](Fixture& f) { factored(f, 0); }, kInvalid, {"rows", "(got rows 0)"}},
      {"rows 0 (row)",
       [&](Fixture& f) {
         factored(f, 0);
         f.t[0].td_factor = LUMINAV_TD_ROW;
       },
       kInvalid, {"rows", "td_factor row", "(got rows 0)"}},
      {"rows not dividing N", [&](Fixture& f) { factored(f, 5); }, kInvalid,
       {"rows must divide num_elements 64", "(got rows 5)"}},
      {"rows above N", [&](Fixture& f) { factored(f, 128); }, kInvalid, {"rows", "(got rows 128)"}},
      {"a zeroed descriptor's TD-CLM (factored, rows 0) with a 1-float exp_avg_sq",
       [](Fixture& f) {
         f.hp.buffer_mode = LUMINAV_MODE_TDCLM;
         f.t[0].td_factor = 0;
         f.t[0].rows = 0;
         f.t[0].exp_avg_sq = &f.s3;
       },
       kInvalid, {"rows"}},
      {"unknown td_factor", [&](Fixture& f) { factored(f, 8); f.t[0].td_factor = 7; }, kInvalid,
       {"td_factor", "(got 7)"}},
      {"negative td_factor", [&](Fixture& f) { factored(f, 8); f.t[0].td_factor = -1; }, kInvalid,
       {"td_factor", "(got -1)"}},
      {"shard boundary inside a row",
       [&](Fixture& f) {
         factored(f, 8);  // C = 8
         f.t[0].index_offset = 12;
       },
       kInvalid, {"index_offset", "multiple of C = 8", "got index_offset 12"}},
      {"grad_scale 0", [](Fixture& f) { f.hp.grad_scale = 0.0; }, kInvalid, {"grad_scale", "(got 0)"}},
      {"grad_scale < 0", [](Fixture& f) { f.hp.grad_scale = -2.0; }, kInvalid, {"grad_scale", "(got -2)"}},
      {"grad_scale NaN", [](Fixture& f) { f.hp.grad_scale = NAN; }, kInvalid, {"grad_scale", "nan"}},
      {"grad_scale Inf", [](Fixture& f) { f.hp.grad_scale = INFINITY; }, kInvalid, {"grad_scale", "inf"}},
      {"a finite gradient that the scale makes Inf",
       [](Fixture& f) {
         f.hp.grad_scale = 1e-30;  // 1/sigma = 1e30
         f.grad32[9] = 1e10f;      // 1e40 overflows fp32
       },
       LUMINAV_STATUS_NONFINITE_GRAD, {"non-finite", "1 of 64"}},
      {"a scaled Inf in a factored tensor",
       [&](Fixture& f) {
         factored(f, 8);
         f.hp.grad_scale = 1e-30;
         f.grad32[40] = -1e10f;
       },
       LUMINAV_STATUS_NONFINITE_GRAD, {"non-finite", "1 of 64"}},
  };
  for (const Row& row : rows) run_row(row);
  for (const char* backend : {"scalar", "simd"}) {
    for (Row row : rows) {
      row.use_options = true;
      row.options.backend = backend;
      run_row(row);
    }
  }
  // rows is ignored outside TD-CLM factored/row.
  Fixture f;
  f.t[0].rows = 5;
  EXPECT_EQ(luminav_step(&f.hp, &f.t[0], nullptr), LUMINAV_STATUS_OK) << luminav_last_error_message();
}

TEST(ErrorRows, ExpAvgSqLength) {
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 7, LUMINAV_MODE_CLM, 0), 91u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 7, LUMINAV_MODE_TDCLM, LUMINAV_TD_FACTORED), 7u + 13u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 91, LUMINAV_MODE_TDCLM, LUMINAV_TD_FACTORED), 91u);  // C = 1
  EXPECT_EQ(luminav_exp_avg_sq_length(1000, 1, LUMINAV_MODE_TDCLM, LUMINAV_TD_FACTORED), 1001u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 7, LUMINAV_MODE_TDCLM, LUMINAV_TD_ROW), 7u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 7, LUMINAV_MODE_TDCLM, LUMINAV_TD_TENSOR), 1u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 0, LUMINAV_MODE_TDCLM, LUMINAV_TD_TENSOR), 1u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 0, LUMINAV_MODE_TDCLM, LUMINAV_TD_FACTORED), 0u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 5, LUMINAV_MODE_TDCLM, LUMINAV_TD_ROW), 0u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 7, LUMINAV_MODE_TDCLM, 3), 0u);
  EXPECT_EQ(luminav_exp_avg_sq_length(91, 7, 5, 0), 0u);
}

// The plain pass-split entry points have no factor sums: a factored or row
// tensor with C > 1 is refused there, and the factor entry points need them.
TEST(ErrorRows, FactorSumsOfThePassSplit) {
  Fixture f;
  f.hp.buffer_mode = LUMINAV_MODE_TDCLM;
  f.t[0].td_factor = LUMINAV_TD_FACTORED;
  f.t[0].rows = 8;
  const auto before = f.snapshot();
  luminav_partials out{};
  luminav_globals globals{};
  EXPECT_EQ(luminav_reduce(&f.hp, &f.t[0], 0, nullptr, &out, nullptr), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("factor_sums.row_sq"), std::string::npos);
  EXPECT_EQ(luminav_apply(&f.hp, &f.t[0], &globals, nullptr), kInvalid);
  std::vector<double> row_sq(8);
  luminav_factor_sums sums{row_sq.data(), nullptr};
  EXPECT_EQ(luminav_reduce_with_factors(&f.hp, &f.t[0], 0, nullptr, &sums, &out, nullptr), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("factor_sums.col_sq"), std::string::npos);
  EXPECT_TRUE(f.snapshot() == before);
  // td_factor row needs no column sums; C = 1 needs none at all.
  f.t[0].td_factor = LUMINAV_TD_ROW;
  EXPECT_EQ(luminav_reduce_with_factors(&f.hp, &f.t[0], 0, nullptr, &sums, &out, nullptr),
            LUMINAV_STATUS_OK)
      << luminav_last_error_message();
  EXPECT_EQ(out.row_count, 8u);
  f.t[0].td_factor = LUMINAV_TD_FACTORED;
  f.t[0].rows = 64;
  EXPECT_EQ(luminav_reduce(&f.hp, &f.t[0], 0, nullptr, &out, nullptr), LUMINAV_STATUS_OK);
  EXPECT_TRUE(f.snapshot() == before);
}

TEST(ErrorRows, StandaloneApi) {
  LuminaVTritonEngine* engine = luminav_triton_engine_create();
  ASSERT_NE(engine, nullptr);
  Fixture f;
  const auto before = f.snapshot();
  auto step = [&](float lr, float beta2, int mode, float* scratch, uint64_t t) {
    return luminav_triton_step_f32(engine, f.param32.data(), f.grad32.data(), f.m.data(), f.v.data(),
                                   nullptr, scratch, Fixture::kN, lr, 0.9f, beta2, 1e-8f, 0.01f, 0.0f,
                                   0.0f, mode, 0, 0, 0.0f, t, 1);
  };
  EXPECT_EQ(step(-0.5f, 0.999f, 2, nullptr, 1), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("lr"), std::string::npos);
  EXPECT_EQ(step(1e-3f, 1.0f, 2, nullptr, 1), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("beta2"), std::string::npos);
  EXPECT_EQ(step(1e-3f, 0.999f, 7, nullptr, 1), kInvalid);
  EXPECT_EQ(step(1e-3f, 0.999f, 2, nullptr, 0), kInvalid);
  // A scratch that overlaps exp_avg.
  EXPECT_EQ(step(1e-3f, 0.999f, 2, f.m.data(), 1), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("scratch"), std::string::npos);
  EXPECT_TRUE(f.snapshot() == before);
  EXPECT_EQ(luminav_triton_step_f32(nullptr, f.param32.data(), f.grad32.data(), f.m.data(), f.v.data(),
                                    nullptr, nullptr, Fixture::kN, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f,
                                    0.0f, 0.0f, 2, 0, 0, 0.0f, 1, 1),
            kInvalid);
  luminav_triton_engine_destroy(engine);
}

}  // namespace

// Note [overlap check memo] (core/validate.cc): a call of many tensors reuses
// the previous call's sorted order for the ranges that did not move. Its
// verdict must stay the full check's over a sequence of calls where a few
// buffers move each time: checked here against a brute-force pairwise test.
// 16 tensors of 4 fp32 elements (80 ranges, above the memo's threshold) at
// float offsets in one arena; two ranges overlap iff their offsets differ by
// less than 4.
TEST(ErrorRows, OverlapVerdictOverMovingBuffersMatchesPairwiseCheck) {
  constexpr size_t kTensors = 16, kElements = 4, kBuffers = kTensors * 5, kSpan = 1200;
  std::vector<float> arena(kSpan + kElements, 0.01f);
  std::vector<size_t> offset(kBuffers);
  for (size_t b = 0; b < kBuffers; ++b) offset[b] = b * 12;  // apart: no overlap at first
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.lr = 1e-4;
  std::vector<luminav_tensor> t(kTensors);
  const auto place = [&] {
    for (size_t i = 0; i < kTensors; ++i) {
      t[i] = luminav_tensor{};
      t[i].param = arena.data() + offset[5 * i];
      t[i].grad = arena.data() + offset[5 * i + 1];
      t[i].exp_avg = arena.data() + offset[5 * i + 2];
      t[i].exp_avg_sq = arena.data() + offset[5 * i + 3];
      t[i].master = arena.data() + offset[5 * i + 4];
      t[i].num_elements = kElements;
    }
  };
  const auto pairwise_overlap = [&] {
    for (size_t a = 0; a < kBuffers; ++a) {
      for (size_t b = a + 1; b < kBuffers; ++b) {
        if ((offset[a] > offset[b] ? offset[a] - offset[b] : offset[b] - offset[a]) < kElements) return true;
      }
    }
    return false;
  };
  size_t refused = 0, accepted = 0;
  for (int call = 0; call < 400; ++call) {
    // Move one to three buffers (the gradients more often, as zero_grad(set_to_none=True) does).
    const size_t moves = 1 + next() % 3;
    for (size_t j = 0; j < moves; ++j) {
      const size_t b = next() % 3 == 0 ? next() % kBuffers : 5 * (next() % kTensors) + 1;
      offset[b] = next() % kSpan;
    }
    if (call % 8 == 7) {  // back apart now and then: the next calls start from a clean set
      for (size_t b = 0; b < kBuffers; ++b) offset[b] = b * 12;
    }
    place();
    for (float& x : arena) x = 0.01f;  // finite whatever the previous call wrote
    const bool overlap = pairwise_overlap();
    const int status = luminav_step_multi(&hp, t.data(), kTensors, nullptr);
    ASSERT_EQ(status, overlap ? kInvalid : LUMINAV_STATUS_OK)
        << "call " << call << ": " << luminav_last_error_message();
    if (overlap) {
      EXPECT_NE(std::string(luminav_last_error_message()).find("overlap"), std::string::npos);
      ++refused;
    } else {
      ++accepted;
    }
    // The same call again: the same verdict (a refusal is never remembered as a success).
    ASSERT_EQ(luminav_step_multi(&hp, t.data(), kTensors, nullptr), status) << "call " << call << " repeated";
  }
  EXPECT_GT(refused, 20u);
  EXPECT_GT(accepted, 20u);
}

// Note [moved gradients] (core/validate.cc): after an accepted call, a call
// whose tensors differ in their gradients only is checked through the memo's
// shortcut. Every gradient moves on every call here (zero_grad(set_to_none=
// True)); the verdict must be the pairwise test's, and a refusal's message
// the one a thread that never validated these tensors (a full check, no
// memo) gives for the same call.
TEST(ErrorRows, OnlyGradientsMovingKeepTheFullChecksVerdictAndMessage) {
  constexpr size_t kTensors = 16, kElements = 4, kSpan = 2000;
  std::vector<float> arena(kSpan + kElements, 0.01f);
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.lr = 1e-4;
  std::vector<size_t> fixed(kTensors * 4), grad(kTensors);
  for (size_t b = 0; b < fixed.size(); ++b) fixed[b] = b * 8;  // param, exp_avg, exp_avg_sq, master: apart
  std::vector<luminav_tensor> t(kTensors);
  const auto place = [&] {
    for (size_t i = 0; i < kTensors; ++i) {
      t[i] = luminav_tensor{};
      t[i].param = arena.data() + fixed[4 * i];
      t[i].grad = arena.data() + grad[i];
      t[i].exp_avg = arena.data() + fixed[4 * i + 1];
      t[i].exp_avg_sq = arena.data() + fixed[4 * i + 2];
      t[i].master = arena.data() + fixed[4 * i + 3];
      t[i].num_elements = kElements;
    }
  };
  const auto overlaps = [](size_t a, size_t b) { return (a > b ? a - b : b - a) < kElements; };
  const auto pairwise_overlap = [&] {
    for (size_t i = 0; i < kTensors; ++i) {
      for (size_t f : fixed) {
        if (overlaps(grad[i], f)) return true;
      }
      for (size_t j = i + 1; j < kTensors; ++j) {
        if (overlaps(grad[i], grad[j])) return true;
      }
    }
    return false;
  };
  const auto fresh_thread_message = [&] {
    std::string message;
    std::thread([&] {
      if (luminav_step_multi(&hp, t.data(), kTensors, nullptr) != LUMINAV_STATUS_OK) {
        message = luminav_last_error_message();
      }
    }).join();
    return message;
  };
  uint64_t state = 777;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  const size_t fixed_end = fixed.size() * 8;
  size_t refused = 0, accepted = 0;
  for (int call = 0; call < 300; ++call) {
    for (size_t i = 0; i < kTensors; ++i) {
      // Mostly beyond the fixed buffers, now and then anywhere (an overlap to find).
      grad[i] = next() % 40 == 0 ? next() % kSpan : fixed_end + 8 * (next() % ((kSpan - fixed_end) / 8));
    }
    place();
    for (float& x : arena) x = 0.01f;
    const bool overlap = pairwise_overlap();
    const std::string expected = overlap ? fresh_thread_message() : std::string();
    const int status = luminav_step_multi(&hp, t.data(), kTensors, nullptr);
    ASSERT_EQ(status, overlap ? kInvalid : LUMINAV_STATUS_OK) << "call " << call << ": " << luminav_last_error_message();
    if (overlap) {
      EXPECT_EQ(std::string(luminav_last_error_message()), expected) << "call " << call;
      ++refused;
    } else {
      ++accepted;
    }
  }
  EXPECT_GT(refused, 20u);
  EXPECT_GT(accepted, 20u);
  // A gradient that is NULL or misaligned after accepted calls: the full check's message.
  for (size_t i = 0; i < kTensors; ++i) grad[i] = fixed_end + 8 * i;
  place();
  ASSERT_EQ(luminav_step_multi(&hp, t.data(), kTensors, nullptr), LUMINAV_STATUS_OK);
  t[3].grad = nullptr;
  EXPECT_EQ(luminav_step_multi(&hp, t.data(), kTensors, nullptr), kInvalid);
  EXPECT_EQ(std::string(luminav_last_error_message()), "tensors[3].grad must not be NULL");
  place();
  ASSERT_EQ(luminav_step_multi(&hp, t.data(), kTensors, nullptr), LUMINAV_STATUS_OK);
  t[5].grad = reinterpret_cast<const char*>(t[5].grad) + 2;
  EXPECT_EQ(luminav_step_multi(&hp, t.data(), kTensors, nullptr), kInvalid);
  EXPECT_NE(std::string(luminav_last_error_message()).find("tensors[5].grad must be aligned to 4 bytes"),
            std::string::npos)
      << luminav_last_error_message();
}

// The same through luminav_step_groups with two groups: an overlap across
// the groups, made by moving one gradient after accepted calls, is refused
// and names both groups' buffers.
TEST(ErrorRows, OverlapAcrossGroupsAfterAcceptedCalls) {
  constexpr size_t kTensors = 16, kElements = 4;
  std::vector<float> arena(2 * kTensors * 5 * 8 + 64, 0.01f);
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  std::vector<luminav_tensor> t(2 * kTensors);
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = luminav_tensor{};
    t[i].param = arena.data() + 40 * i;
    t[i].grad = arena.data() + 40 * i + 8;
    t[i].exp_avg = arena.data() + 40 * i + 16;
    t[i].exp_avg_sq = arena.data() + 40 * i + 24;
    t[i].master = arena.data() + 40 * i + 32;
    t[i].num_elements = kElements;
  }
  luminav_group groups[2] = {};
  groups[0].hp = &hp;
  groups[0].tensors = t.data();
  groups[0].count = kTensors;
  groups[1].hp = &hp;
  groups[1].tensors = t.data() + kTensors;
  groups[1].count = kTensors;
  std::vector<float> fresh_grads(2 * kTensors * 8, 0.01f);
  for (int call = 0; call < 3; ++call) {
    for (size_t i = 0; i < t.size(); ++i) t[i].grad = fresh_grads.data() + 8 * i + (call % 2) * 4;
    ASSERT_EQ(luminav_step_groups(groups, 2, nullptr, nullptr), LUMINAV_STATUS_OK) << luminav_last_error_message();
  }
  t[kTensors + 3].grad = static_cast<float*>(t[5].exp_avg) + 2;  // group 1's gradient inside group 0's exp_avg
  for (int repeat = 0; repeat < 2; ++repeat) {
    ASSERT_EQ(luminav_step_groups(groups, 2, nullptr, nullptr), kInvalid);
    const std::string message = luminav_last_error_message();
    EXPECT_NE(message.find("groups[0].tensors[5].exp_avg"), std::string::npos) << message;
    EXPECT_NE(message.find("groups[1].tensors[3].grad"), std::string::npos) << message;
  }
  t[kTensors + 3].grad = fresh_grads.data() + 8 * (kTensors + 3);
  EXPECT_EQ(luminav_step_groups(groups, 2, nullptr, nullptr), LUMINAV_STATUS_OK) << luminav_last_error_message();
}
