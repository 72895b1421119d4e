// Backend registry (simdjson-style): built once, probed lazily, chosen per call.
#include "optim/dispatch/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "optim/dispatch/backend_factories.h"

namespace luminav::dispatch {
namespace {

struct Slot {
  std::unique_ptr<Backend> backend;
  std::once_flag probe_once;
  bool available = false;
  std::string why_not;
};

std::vector<std::unique_ptr<Slot>> build_slots() {
  std::vector<std::unique_ptr<Backend>> made;
  made.push_back(make_scalar_backend());
#ifdef LUMINAV_HAS_SIMD_BACKEND
  made.push_back(make_simd_backend());
#endif
#ifdef LUMINAV_HAS_CUDA_BACKEND
  made.push_back(make_cuda_backend());
#endif
#ifdef LUMINAV_HAS_TRITON_AOT_BACKEND
  made.push_back(make_triton_aot_backend());
#endif
#ifdef LUMINAV_HAS_HIP_BACKEND
  made.push_back(make_hip_backend());
#endif
#ifdef LUMINAV_HAS_VULKAN_BACKEND
  made.push_back(make_vulkan_backend());
#endif
  std::vector<std::unique_ptr<Slot>> slots;
  for (auto& backend : made) {
    if (!backend) continue;
    auto slot = std::make_unique<Slot>();
    slot->backend = std::move(backend);
    slots.push_back(std::move(slot));
  }
  return slots;
}

std::vector<std::unique_ptr<Slot>>& slots() {
  static std::vector<std::unique_ptr<Slot>> all = build_slots();
  return all;
}

Slot& probed(size_t index) {
  Slot& slot = *slots()[index];
  std::call_once(slot.probe_once, [&slot] {
    std::string reason;
    try {
      slot.available = slot.backend->available(&reason);
    } catch (const std::exception& e) {
      slot.available = false;
      reason = std::string("probe failed: ") + e.what();
    } catch (...) {
      slot.available = false;
      reason = "probe failed";
    }
    if (!slot.available && reason.empty()) reason = "not available on this machine";
    if (slot.available) reason.clear();
    std::replace(reason.begin(), reason.end(), '\n', ' ');  // one line
    slot.why_not = std::move(reason);
  });
  return slot;
}

bool logging_enabled() {
  const char* env = std::getenv("LUMINAV_LOG");
  return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
}

// The auto choice falls back silently unless LUMINAV_LOG is set; then it says
// why, once per process.
void log_fallback_once(const std::string& reason) {
  static std::once_flag logged;
  if (!logging_enabled()) return;
  std::call_once(logged, [&] { std::fprintf(stderr, "luminav: %s\n", reason.c_str()); });
}

std::string known_names() {
  std::string names;
  for (std::string_view name : kKnownBackendNames) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

const char* device_name(int device_type) {
  switch (device_type) {
    case LUMINAV_DEVICE_CPU: return "CPU (host memory)";
    case LUMINAV_DEVICE_CUDA: return "CUDA";
    case LUMINAV_DEVICE_ROCM: return "ROCm";
    default: return "unknown";
  }
}

int index_of(std::string_view name) {
  auto& all = slots();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]->backend->name() == name) return static_cast<int>(i);
  }
  return -1;
}

core::Status forced_backend(std::string_view name, int device_type, Backend** chosen) {
  bool known = false;
  for (std::string_view k : kKnownBackendNames) known = known || (k == name);
  if (!known) {
    return core::Status::invalid("unknown backend '" + std::string(name) + "' (known: auto, " +
                                 known_names() + ")");
  }
  const int index = index_of(name);
  if (index < 0) {
    return core::Status::error(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                               "backend '" + std::string(name) +
                                   "' is not compiled into this build of libluminav");
  }
  Slot& slot = probed(static_cast<size_t>(index));
  if (!slot.available) {
    return core::Status::error(LUMINAV_STATUS_BACKEND_UNAVAILABLE,
                               "backend '" + std::string(name) + "' is unavailable: " + slot.why_not);
  }
  if (slot.backend->device_type() != device_type) {
    return core::Status::invalid("backend '" + std::string(name) + "' works on " +
                                 device_name(slot.backend->device_type()) +
                                 " memory but device_type is " + device_name(device_type));
  }
  *chosen = slot.backend.get();
  return core::Status::success();
}

}  // namespace

size_t backend_count() { return slots().size(); }

Backend& backend_at(size_t index) { return *slots()[index]->backend; }

bool backend_available(size_t index, std::string* why_not) {
  Slot& slot = probed(index);
  if (why_not) *why_not = slot.why_not;
  return slot.available;
}

Backend* find_backend(std::string_view name) {
  const int index = index_of(name);
  return index < 0 ? nullptr : slots()[static_cast<size_t>(index)]->backend.get();
}

std::string backend_label(const Backend& backend) {
  std::string label(backend.name());
  const std::string detail = backend.detail();
  if (!detail.empty()) label += ":" + detail;
  return label;
}

// True when an available device backend says `address` is its memory.
bool served_by_device_backend(const void* address) {
  if (address == nullptr) return false;
  auto& all = slots();
  for (size_t i = 0; i < all.size(); ++i) {
    Backend& b = *all[i]->backend;
    if (b.device_type() != LUMINAV_DEVICE_CPU && probed(i).available && b.serves_pointer(address, nullptr)) return true;
  }
  return false;
}

core::Status select_backend(const luminav_options* options, size_t total_elements,
                            Backend** chosen, const void* sample) {
  const int device_type = options ? options->device_type : LUMINAV_DEVICE_CPU;
  if (device_type != LUMINAV_DEVICE_CPU && device_type != LUMINAV_DEVICE_CUDA &&
      device_type != LUMINAV_DEVICE_ROCM) {
    return core::Status::invalid("device_type must be 0 (CPU), 1 (CUDA) or 2 (ROCm) (got " +
                                 std::to_string(device_type) + ")");
  }
  std::string_view requested;
  if (options && options->backend && *options->backend) requested = options->backend;
  if (requested.empty() || requested == "auto") {
    const char* env = std::getenv("LUMINAV_FORCE_BACKEND");
    requested = (env && *env) ? std::string_view(env) : std::string_view();
  }
  if (!requested.empty() && requested != "auto") return forced_backend(requested, device_type, chosen);

  if (device_type == LUMINAV_DEVICE_CUDA) return forced_backend("cuda", device_type, chosen);
  if (device_type == LUMINAV_DEVICE_ROCM) return forced_backend("hip", device_type, chosen);

  // Host memory (Note [size routing]).
  auto& all = slots();
  if (total_elements >= kOffloadMinElements) {
    for (size_t i = 0; i < all.size(); ++i) {
      Backend& b = *all[i]->backend;
      if (b.device_type() == LUMINAV_DEVICE_CPU && probed(i).available && b.offload() &&
          !served_by_device_backend(sample)) {
        *chosen = &b;
        return core::Status::success();
      }
    }
  }
  const int simd = index_of("simd");
  if (simd >= 0) {
    Slot& slot = probed(static_cast<size_t>(simd));
    if (slot.available) {
      *chosen = slot.backend.get();
      return core::Status::success();
    }
    log_fallback_once("simd backend unavailable (" + slot.why_not + "); using scalar");
  } else {
    log_fallback_once("simd backend not compiled in; using scalar");
  }
  *chosen = find_backend("scalar");
  return core::Status::success();
}

}  // namespace luminav::dispatch
