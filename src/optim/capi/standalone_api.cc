// The seed's standalone API (luminav_triton_standalone.h) on top of the
// dispatcher: an engine fixes its backend once and steps fp32 tensors.
#include <cstdlib>
#include <new>
#include <string>

#include "luminav/luminav.h"
#include "luminav_triton_standalone.h"
#include "optim/capi/error_boundary.h"
#include "optim/capi/export.h"
#include "optim/capi/single_tensor.h"
#include "optim/core/reduction_tile.h"
#include "optim/dispatch/cpu_features.h"
#include "optim/dispatch/registry.h"
#include "optim/dispatch/step_driver.h"

struct LuminaVTritonEngine {
  std::string backend;   // the backend every step of this engine uses
  int device_type = LUMINAV_DEVICE_CPU;
  std::string platform;  // "cpu", "cuda", "rocm", "vulkan"
  std::string arch;      // "x86_64-avx512", the GPU's architecture, ...
};

namespace {

using luminav::core::Status;
namespace dispatch = luminav::dispatch;

const char* platform_of(const luminav::Backend& backend) {
  const std::string_view name = backend.name();
  if (name == "cuda") return "cuda";
  if (name == "hip") return "rocm";
  if (name == "vulkan") return "vulkan";
  return "cpu";
}

// Note [engine memory]: an engine works on host memory, with the best CPU
// backend (simd, else scalar), unless LUMINAV_FORCE_BACKEND names another
// backend when the engine is created; then its pointers are that backend's
// memory (device pointers for cuda/hip).
Status make_engine(LuminaVTritonEngine* engine) {
  luminav::Backend* backend = nullptr;
  const char* forced = std::getenv("LUMINAV_FORCE_BACKEND");
  luminav_options options{};
  options.device_type = LUMINAV_DEVICE_CPU;
  if (forced && *forced && std::string_view(forced) != "auto") {
    if (luminav::Backend* named = dispatch::find_backend(forced)) {
      options.device_type = named->device_type();
    }
    options.backend = forced;
  }
  if (Status s = dispatch::select_backend(&options, 0, &backend); !s.ok()) return s;
  engine->backend = std::string(backend->name());
  engine->device_type = backend->device_type();
  engine->platform = platform_of(*backend);
  if (engine->platform == "cpu") {
    engine->arch = dispatch::cpu_arch();
  } else {
    const std::string detail = backend->detail();
    engine->arch = detail.empty() ? engine->platform : detail;
  }
  return Status::success();
}

}  // namespace

LUMINAV_EXPORT LuminaVTritonEngine* luminav_triton_engine_create(void) {
  LuminaVTritonEngine* engine = nullptr;
  const int code = luminav::capi::guarded([&] {
    auto* made = new LuminaVTritonEngine();
    Status s = make_engine(made);
    if (s.ok()) {
      engine = made;
    } else {
      delete made;
    }
    return s;
  });
  return code == LUMINAV_STATUS_OK ? engine : nullptr;
}

LUMINAV_EXPORT void luminav_triton_engine_destroy(LuminaVTritonEngine* engine) { delete engine; }

LUMINAV_EXPORT const char* luminav_triton_get_platform(const LuminaVTritonEngine* engine) {
  return engine ? engine->platform.c_str() : "";
}

LUMINAV_EXPORT const char* luminav_triton_get_arch(const LuminaVTritonEngine* engine) {
  return engine ? engine->arch.c_str() : "";
}

LUMINAV_EXPORT int luminav_triton_step_f32(
    LuminaVTritonEngine* engine, float* param, const float* grad, float* exp_avg,
    float* exp_avg_sq, float* master_param, float* scratch, size_t num_elements, float lr,
    float beta1, float beta2, float eps, float weight_decay, float tau, float lam,
    int buffer_mode, int cautious, int bound_mode, float bound_ratio, uint64_t step,
    uint32_t seed) {
  return luminav::capi::guarded([&] {
    if (engine == nullptr) return Status::invalid("engine must not be NULL");
    // Every float widens to double exactly (spec: bias corrections from the
    // betas as the caller gave them).
    luminav_hyperparams hp;
    luminav_hyperparams_init(&hp);
    hp.lr = lr;
    hp.beta1 = beta1;
    hp.beta2 = beta2;
    hp.eps = eps;
    hp.weight_decay = weight_decay;
    hp.tau = tau;
    hp.lam = lam;
    hp.bound_ratio = bound_ratio;
    hp.buffer_mode = buffer_mode;
    hp.cautious = cautious;
    hp.bound_mode = bound_mode;
    hp.check_finite = 1;
    hp.stochastic_rounding = 1;
    hp.step = step;

    const luminav_tensor tensor = luminav::capi::single_tensor(
        param, grad, exp_avg, exp_avg_sq, master_param, num_elements, seed, LUMINAV_DTYPE_F32);

    luminav_options options{};
    options.backend = engine->backend.c_str();
    options.device_type = engine->device_type;
    options.scratch = scratch;
    // The seed's signature carries no size: a given scratch is taken to hold
    // luminav_scratch_bytes(num_elements) bytes, as the header requires.
    options.scratch_bytes = scratch ? luminav::core::scratch_bytes_for(num_elements) : 0;
    return dispatch::run_step(&hp, &tensor, 1, &options);
  });
}
