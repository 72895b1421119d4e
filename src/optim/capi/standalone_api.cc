// The seed's standalone API (luminav_triton_standalone.h) on top of the
// dispatcher: an engine steps fp32 tensors on the CPU or, for device
// pointers, on the GPU.
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
  std::string backend;   // the backend of host pointers (or the forced one)
  int device_type = LUMINAV_DEVICE_CPU;
  // The backend of device pointers (cuda when it can run here), or nullptr:
  // none, or LUMINAV_FORCE_BACKEND fixed the backend of every pointer.
  luminav::Backend* gpu = nullptr;
  std::string gpu_backend;  // its name
  std::string platform;  // "cpu", "cuda", "rocm", "vulkan"
  std::string arch;      // "x86_64-avx512", the GPU's architecture, ...
};

namespace {

using luminav::core::Status;
namespace dispatch = luminav::dispatch;

const char* platform_of(const luminav::Backend& backend) {
  const std::string_view name = backend.name();
  if (name == "cuda" || name == "triton-aot") return "cuda";
  if (name == "hip") return "rocm";
  if (name == "vulkan") return "vulkan";
  return "cpu";
}

void describe(const luminav::Backend& backend, LuminaVTritonEngine* engine) {
  engine->platform = platform_of(backend);
  if (engine->platform == "cpu") {
    engine->arch = dispatch::cpu_arch();
  } else {
    const std::string detail = backend.detail();
    engine->arch = detail.empty() ? engine->platform : detail;
  }
}

// The GPU backend that routes by pointer (Backend::serves_pointer), when it
// can run here. Only cuda answers the pointer query today.
luminav::Backend* usable_gpu_backend() {
  for (size_t i = 0; i < dispatch::backend_count(); ++i) {
    luminav::Backend& b = dispatch::backend_at(i);
    if (b.name() == "cuda" && dispatch::backend_available(i)) return &b;
  }
  return nullptr;
}

// Note [engine memory]: the header's rules. LUMINAV_FORCE_BACKEND (not
// "auto") at creation fixes the backend of every pointer. Otherwise host
// pointers go to the best CPU backend (simd, else scalar) and, when the CUDA
// backend can run here, device pointers go to it, chosen per call by the
// memory `param` lives in; the engine then reports the GPU.
Status make_engine(LuminaVTritonEngine* engine) {
  luminav::Backend* backend = nullptr;
  const char* forced = std::getenv("LUMINAV_FORCE_BACKEND");
  luminav_options options{};
  options.device_type = LUMINAV_DEVICE_CPU;
  const bool is_forced = forced && *forced && std::string_view(forced) != "auto";
  if (is_forced) {
    if (luminav::Backend* named = dispatch::find_backend(forced)) {
      options.device_type = named->device_type();
    }
    options.backend = forced;
  }
  if (Status s = dispatch::select_backend(&options, 0, &backend); !s.ok()) return s;
  engine->backend = std::string(backend->name());
  engine->device_type = backend->device_type();
  engine->gpu = is_forced ? nullptr : usable_gpu_backend();
  if (engine->gpu) engine->gpu_backend = std::string(engine->gpu->name());
  describe(engine->gpu ? *engine->gpu : *backend, engine);
  return Status::success();
}

// Where a step runs: the GPU when `param` is its memory, else the host
// backend; every other non-NULL buffer must live on the same side (and
// device), else INVALID_ARGUMENT before anything is touched.
Status route_step(const LuminaVTritonEngine& engine, const luminav_tensor& tensor,
                  const void* scratch, luminav_options* options) {
  options->backend = engine.backend.c_str();
  options->device_type = engine.device_type;
  if (engine.gpu == nullptr) return Status::success();
  int device = 0;
  const bool on_gpu = engine.gpu->serves_pointer(tensor.param, &device);
  const struct {
    const char* name;
    const void* address;
  } others[] = {{"grad", tensor.grad},         {"exp_avg", tensor.exp_avg},
                {"exp_avg_sq", tensor.exp_avg_sq}, {"master_param", tensor.master},
                {"scratch", scratch}};
  const std::string& gpu_name = engine.gpu_backend;
  for (const auto& other : others) {
    if (other.address == nullptr) continue;
    int other_device = 0;
    const bool other_on_gpu = engine.gpu->serves_pointer(other.address, &other_device);
    if (other_on_gpu != on_gpu) {
      return Status::invalid(std::string("mixed host and device pointers: param is ") +
                             (on_gpu ? gpu_name + " device memory" : "host memory") + " but " +
                             other.name + " is " + (other_on_gpu ? gpu_name + " device memory" : "host memory") +
                             " (all buffers of a step must be on one side)");
    }
    if (on_gpu && other_device != device) {
      return Status::invalid(std::string("param is on device ") + std::to_string(device) + " but " +
                             other.name + " is on device " + std::to_string(other_device));
    }
  }
  if (on_gpu) {
    options->backend = engine.gpu_backend.c_str();
    options->device_type = engine.gpu->device_type();
    options->device_index = device;
    options->stream = nullptr;  // the default stream
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
    if (Status s = route_step(*engine, tensor, scratch, &options); !s.ok()) return s;
    options.scratch = scratch;
    // The seed's signature carries no size: a given scratch is taken to hold
    // luminav_scratch_bytes(num_elements) bytes, as the header requires.
    options.scratch_bytes = scratch ? luminav::core::scratch_bytes_for(num_elements) : 0;
    return dispatch::run_step(&hp, &tensor, 1, &options);
  });
}
