// The loader (dlopen), instance, device choice and pipelines.
#include "optim/vulkan/vulkan_context.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "optim/vulkan/vulkan_layout.h"

namespace luminav::vulkan {

std::string vk_result_name(VkResult result) {
  switch (result) {
#define LUMINAV_VK_CASE(r) \
  case r: return #r;
    LUMINAV_VK_CASE(VK_SUCCESS)
    LUMINAV_VK_CASE(VK_NOT_READY)
    LUMINAV_VK_CASE(VK_TIMEOUT)
    LUMINAV_VK_CASE(VK_INCOMPLETE)
    LUMINAV_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    LUMINAV_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    LUMINAV_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    LUMINAV_VK_CASE(VK_ERROR_DEVICE_LOST)
    LUMINAV_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    LUMINAV_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    LUMINAV_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    LUMINAV_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    LUMINAV_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    LUMINAV_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    LUMINAV_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    LUMINAV_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
#undef LUMINAV_VK_CASE
    default: return "VkResult " + std::to_string(static_cast<int>(result));
  }
}

namespace {

std::atomic<int> validation_errors{0};

VKAPI_ATTR VkBool32 VKAPI_CALL report_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  const bool error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
  if (error) ++validation_errors;
  std::fprintf(stderr, "luminav-vulkan-validation: %s: %s\n", error ? "error" : "warning",
               data && data->pMessage ? data->pMessage : "");
  return VK_FALSE;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

std::string type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

std::string version_text(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

// What one physical device offers of what the shaders need.
struct Probe {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  uint32_t subgroup_size = 0;
  bool float64 = false, int64 = false, storage16 = false, subgroup_ops = false;
  bool float_controls = false;  // DenormPreserve and SignedZeroInfNanPreserve for fp32
  bool denorm_preserve32 = false, signed_zero_inf_nan32 = false;
  bool host_import = false, size_control_ext = false, full_subgroups = false;
  VkDeviceSize import_alignment = 4096;
  VkDeviceSize max_allocation = 0;
  int compute_family = -1;
  std::string missing;  // what it lacks ("" when usable)
};

Probe probe_device(const Api& vk, VkPhysicalDevice handle) {
  Probe p;
  p.handle = handle;
  vk.vkGetPhysicalDeviceProperties(handle, &p.props);
  uint32_t count = 0;
  vk.vkEnumerateDeviceExtensionProperties(handle, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vk.vkEnumerateDeviceExtensionProperties(handle, nullptr, &count, extensions.data());
  for (const auto& e : extensions) {
    if (std::strcmp(e.extensionName, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) == 0) p.host_import = true;
    if (std::strcmp(e.extensionName, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) == 0) p.size_control_ext = true;
  }
  const bool api13 = p.props.apiVersion >= VK_API_VERSION_1_3;
  if (p.props.apiVersion < VK_API_VERSION_1_1) {
    p.missing = "Vulkan 1.1 (has " + version_text(p.props.apiVersion) + ")";
    return p;
  }
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT size_control{};
  size_control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  if (api13 || p.size_control_ext) storage16.pNext = &size_control;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  vk.vkGetPhysicalDeviceFeatures2(handle, &features);
  p.float64 = features.features.shaderFloat64;
  p.int64 = features.features.shaderInt64;
  p.storage16 = storage16.storageBuffer16BitAccess;
  p.full_subgroups = size_control.computeFullSubgroups;

  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{};
  host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
  VkPhysicalDeviceFloatControlsProperties float_controls{};
  float_controls.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
  float_controls.pNext = p.host_import ? &host : nullptr;
  const bool api12 = p.props.apiVersion >= VK_API_VERSION_1_2;  // float controls are core from 1.2
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  maintenance3.pNext = api12 ? static_cast<void*>(&float_controls) : (p.host_import ? &host : nullptr);
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = &maintenance3;
  VkPhysicalDeviceProperties2 props2{};
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &subgroup;
  vk.vkGetPhysicalDeviceProperties2(handle, &props2);
  p.subgroup_size = subgroup.subgroupSize;
  const VkSubgroupFeatureFlags ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                     VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  p.subgroup_ops = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                   (subgroup.supportedOperations & ops) == ops;
  p.max_allocation = maintenance3.maxMemoryAllocationSize;
  p.denorm_preserve32 = api12 && float_controls.shaderDenormPreserveFloat32;
  p.signed_zero_inf_nan32 = api12 && float_controls.shaderSignedZeroInfNanPreserveFloat32;
  p.float_controls = p.denorm_preserve32 && p.signed_zero_inf_nan32;
  if (p.host_import) p.import_alignment = host.minImportedHostPointerAlignment;

  vk.vkGetPhysicalDeviceQueueFamilyProperties(handle, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(handle, &count, families.data());
  for (uint32_t i = 0; i < count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      p.compute_family = static_cast<int>(i);
      break;
    }
  }
  std::string missing;
  auto need = [&missing](bool ok, const char* what) {
    if (ok) return;
    if (!missing.empty()) missing += ", ";
    missing += what;
  };
  need(p.float64, "shaderFloat64");
  need(p.storage16, "storageBuffer16BitAccess");
  need(p.subgroup_ops, "compute subgroup basic/arithmetic/shuffle");
  need(p.compute_family >= 0, "a compute queue");
  need(p.subgroup_size >= 1 && p.subgroup_size <= kWorkgroup, "a subgroup size <= 256");
  p.missing = missing;
  return p;
}

// Candidates by kind: a GPU before a CPU implementation.
int preference(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
    default: return 3;
  }
}

// Note [Vulkan routing]: "auto" gives host tensors to Vulkan only on a
// unified-memory GPU that imports host memory in place (an integrated GPU
// with VK_EXT_external_memory_host): there the step reads the arrays where
// they are. A discrete GPU would read them across PCIe (slower than the CPU's
// own SIMD step; device memory is CUDA's), and a CPU implementation such as
// lavapipe only competes with the simd backend on the same cores.
std::string routing_reason(const Probe& p, bool* auto_routed) {
  *auto_routed = false;
  switch (p.props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      if (!p.host_import) return "integrated GPU without VK_EXT_external_memory_host: forced only";
      *auto_routed = true;
      return "unified memory with host import: auto routes host tensors of >= 16384 elements here";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU: host tensors would cross PCIe, so auto keeps them on simd (device memory goes "
             "to cuda); forced only";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU implementation (e.g. lavapipe): for tests, forced only";
    default:
      return "not a unified-memory GPU: forced only";
  }
}

}  // namespace

struct ContextHolder {
  std::once_flag once;
  std::unique_ptr<Context> context;
  std::string why_not;
  std::vector<DeviceReport> reports;
};

// Never destroyed: a driver's threads may outlive static destructors, so
// the device is left to the process's exit.
static ContextHolder& holder() {
  static ContextHolder* h = new ContextHolder();
  return *h;
}

Context* Context::get(std::string* why_not) {
  ContextHolder& h = holder();
  std::call_once(h.once, [&h] {
    std::unique_ptr<Context> c(new Context());
    std::string why;
    bool ok = false;
    try {
      ok = c->init(&why);
    } catch (const std::exception& e) {
      why = std::string("Vulkan setup failed: ") + e.what();
    }
    h.reports = c->reports_;
    if (ok) {
      h.context = std::move(c);
    } else {
      h.why_not = why.empty() ? "Vulkan setup failed" : why;
    }
  });
  if (!h.context && why_not) *why_not = h.why_not;
  return h.context.get();
}

const std::vector<DeviceReport>& Context::devices() {
  get(nullptr);
  return holder().reports;
}

int Context::memory_type(uint32_t type_bits, VkMemoryPropertyFlags flags) const {
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & flags) == flags) return static_cast<int>(i);
  }
  return -1;
}

bool Context::init(std::string* why_not) {
  const char* loader = std::getenv("LUMINAV_VULKAN_LOADER");
  const char* library = (loader && *loader) ? loader : "libvulkan.so.1";
  library_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    const char* err = dlerror();
    *why_not = std::string("Vulkan loader ") + library + " not found (" + (err ? err : "dlopen failed") +
               "; install libvulkan1)";
    return false;
  }
  api_.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library_, "vkGetInstanceProcAddr"));
  if (api_.vkGetInstanceProcAddr == nullptr) {
    *why_not = std::string(library) + " has no vkGetInstanceProcAddr";
    return false;
  }
  auto& vk = api_;
#define LUMINAV_VK_LOAD_GLOBAL(name) \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
  LUMINAV_VK_GLOBAL_FUNCTIONS(LUMINAV_VK_LOAD_GLOBAL)
#undef LUMINAV_VK_LOAD_GLOBAL
  if (!vk.vkCreateInstance) {
    *why_not = "the Vulkan loader gives no vkCreateInstance";
    return false;
  }

  const bool validation = env_is("LUMINAV_VULKAN_VALIDATION", "1");
  std::vector<const char*> layers, extensions;
  if (validation) {
    uint32_t count = 0;
    vk.vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> available(count);
    vk.vkEnumerateInstanceLayerProperties(&count, available.data());
    bool found = false;
    for (const auto& l : available) found = found || std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
    if (!found) {
      *why_not = "LUMINAV_VULKAN_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed";
      return false;
    }
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "luminav";
  app.pEngineName = "luminav";
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  if (VkResult r = vk.vkCreateInstance(&info, nullptr, &instance_); r != VK_SUCCESS) {
    *why_not = "no Vulkan driver (vkCreateInstance: " + vk_result_name(r) + ")";
    instance_ = VK_NULL_HANDLE;
    return false;
  }
#define LUMINAV_VK_LOAD_INSTANCE(name) \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(instance_, #name));
  LUMINAV_VK_INSTANCE_FUNCTIONS(LUMINAV_VK_LOAD_INSTANCE)
  if (validation) {
    LUMINAV_VK_LOAD_INSTANCE(vkCreateDebugUtilsMessengerEXT)
    LUMINAV_VK_LOAD_INSTANCE(vkDestroyDebugUtilsMessengerEXT)
  }
#undef LUMINAV_VK_LOAD_INSTANCE
  if (validation && vk.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT m{};
    m.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    m.pfnUserCallback = report_validation;
    vk.vkCreateDebugUtilsMessengerEXT(instance_, &m, nullptr, &messenger_);
    std::fprintf(stderr, "luminav-vulkan-validation: on (VK_LAYER_KHRONOS_validation)\n");
  }

  uint32_t count = 0;
  vk.vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> handles(count);
  if (count) vk.vkEnumeratePhysicalDevices(instance_, &count, handles.data());
  if (count == 0) {
    *why_not = "no Vulkan device (the loader found no driver with a device; VK_DRIVER_FILES selects drivers)";
    return false;
  }
  std::vector<Probe> probes;
  for (VkPhysicalDevice h : handles) probes.push_back(probe_device(vk, h));

  int chosen = -1;
  if (const char* pick = std::getenv("LUMINAV_VULKAN_DEVICE"); pick && *pick) {
    const int index = std::atoi(pick);
    if (index < 0 || index >= static_cast<int>(probes.size()) || !probes[index].missing.empty()) {
      *why_not = std::string("LUMINAV_VULKAN_DEVICE=") + pick + " is not a usable device index";
      chosen = -2;
    } else {
      chosen = index;
    }
  } else {
    for (size_t i = 0; i < probes.size(); ++i) {
      if (!probes[i].missing.empty()) continue;
      if (chosen < 0 || preference(probes[i].props.deviceType) < preference(probes[chosen].props.deviceType)) {
        chosen = static_cast<int>(i);
      }
    }
  }
  for (size_t i = 0; i < probes.size(); ++i) {
    DeviceReport r;
    r.name = probes[i].props.deviceName;
    r.type = type_name(probes[i].props.deviceType);
    r.api = version_text(probes[i].props.apiVersion);
    r.usable = probes[i].missing.empty();
    r.chosen = static_cast<int>(i) == chosen;
    if (!r.usable) {
      r.why = "not used: lacks " + probes[i].missing;
    } else if (!r.chosen) {
      r.why = "usable, not chosen (LUMINAV_VULKAN_DEVICE=" + std::to_string(i) + " picks it)";
    } else {
      r.why = routing_reason(probes[i], &r.auto_routed);
    }
    reports_.push_back(r);
  }
  if (chosen == -1) {
    *why_not = "no usable Vulkan device: " + std::string(probes[0].props.deviceName) + " lacks " + probes[0].missing;
    return false;
  }
  if (chosen < 0) return false;
  const Probe& p = probes[static_cast<size_t>(chosen)];
  physical_ = p.handle;
  device_name_ = p.props.deviceName;
  device_type_ = p.props.deviceType;
  auto_routed_ = reports_[static_cast<size_t>(chosen)].auto_routed;
  subgroup_size_ = p.subgroup_size;
  timestamp_period_ = p.props.limits.timestampPeriod;
  storage_alignment_ = p.props.limits.minStorageBufferOffsetAlignment;
  max_range_ = p.props.limits.maxStorageBufferRange;
  if (p.max_allocation > 0 && p.max_allocation < max_range_) max_range_ = p.max_allocation;
  if (const char* limit = std::getenv("LUMINAV_VULKAN_MAX_RANGE"); limit && *limit) {
    const unsigned long long v = std::strtoull(limit, nullptr, 10);
    if (v >= 65536 && v < max_range_) max_range_ = v;
  }
  max_allocations_ = p.props.limits.maxMemoryAllocationCount;
  if (const char* limit = std::getenv("LUMINAV_VULKAN_MAX_ALLOCATIONS"); limit && *limit) {
    const unsigned long long v = std::strtoull(limit, nullptr, 10);
    if (v >= 16 && v < max_allocations_) max_allocations_ = static_cast<uint32_t>(v);
  }
  import_alignment_ = p.import_alignment;
  host_import_ = p.host_import && !env_is("LUMINAV_VULKAN_IMPORT", "0");
  // The shader set (lv_common.glsl): the hash in 32-bit pairs without
  // shaderInt64 (LUMINAV_VULKAN_INT64=0 forces it, for tests); the float
  // controls where the device keeps fp32 subnormals only when asked.
  int64_ = p.int64 && !env_is("LUMINAV_VULKAN_INT64", "0");
  float_controls_ = p.float_controls;
  shader_suffix_ = std::string(int64_ ? "" : "_i32") + (float_controls_ ? "_fc" : "");
  // Note [CPU specialization] (lv_common.glsl): a CPU implementation runs
  // both sides of every branch; GPUs keep the unspecialized shaders.
  specialize_ = device_type_ == VK_PHYSICAL_DEVICE_TYPE_CPU && !env_is("LUMINAV_VULKAN_SPECIALIZE", "0");
  reports_[static_cast<size_t>(chosen)].why +=
      std::string("; shaders: hash in ") +
      (int64_ ? "64-bit integers" : p.int64 ? "32-bit pairs (LUMINAV_VULKAN_INT64=0)" : "32-bit pairs (no shaderInt64)") +
      (float_controls_ ? ", fp32 subnormals kept by DenormPreserve"
                       : std::string(", the device's default fp32 subnormal mode (offers DenormPreserve: ") +
                             (p.denorm_preserve32 ? "yes" : "no") + ", SignedZeroInfNanPreserve: " +
                             (p.signed_zero_inf_nan32 ? "yes" : "no") + ")");
  if (specialize_) reports_[static_cast<size_t>(chosen)].why += "; reduce and apply specialized to each job's options";
  vk.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  // The device, with what the shaders use.
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = static_cast<uint32_t>(p.compute_family);
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  std::vector<const char*> device_extensions;
  if (p.host_import) device_extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  const bool api13 = p.props.apiVersion >= VK_API_VERSION_1_3;
  const bool full_subgroups = p.full_subgroups && (api13 || p.size_control_ext);
  if (full_subgroups && !api13) device_extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT size_control{};
  size_control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT;
  size_control.computeFullSubgroups = VK_TRUE;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  storage16.storageBuffer16BitAccess = VK_TRUE;
  storage16.pNext = full_subgroups ? &size_control : nullptr;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  features.features.shaderFloat64 = VK_TRUE;
  features.features.shaderInt64 = int64_ ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo device_info{};
  device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device_info.pNext = &features;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.enabledExtensionCount = static_cast<uint32_t>(device_extensions.size());
  device_info.ppEnabledExtensionNames = device_extensions.data();
  if (VkResult r = vk.vkCreateDevice(physical_, &device_info, nullptr, &device_); r != VK_SUCCESS) {
    *why_not = "vkCreateDevice(" + device_name_ + "): " + vk_result_name(r);
    device_ = VK_NULL_HANDLE;
    return false;
  }
#define LUMINAV_VK_LOAD_DEVICE(name) \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetDeviceProcAddr(device_, #name));
  LUMINAV_VK_DEVICE_FUNCTIONS(LUMINAV_VK_LOAD_DEVICE)
  if (p.host_import) LUMINAV_VK_LOAD_DEVICE(vkGetMemoryHostPointerPropertiesEXT)
#undef LUMINAV_VK_LOAD_DEVICE
  vk.vkGetDeviceQueue(device_, queue_info.queueFamilyIndex, 0, &queue_);

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = queue_info.queueFamilyIndex;
  if (VkResult r = vk.vkCreateCommandPool(device_, &pool_info, nullptr, &pool_); r != VK_SUCCESS) {
    *why_not = "vkCreateCommandPool: " + vk_result_name(r);
    return false;
  }

  VkDescriptorSetLayoutBinding bindings[kBindingCount]{};
  for (uint32_t b = 0; b < kBindingCount; ++b) {
    bindings[b].binding = b;
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = kBindingCount;
  set_info.pBindings = bindings;
  if (VkResult r = vk.vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &set_layout_); r != VK_SUCCESS) {
    *why_not = "vkCreateDescriptorSetLayout: " + vk_result_name(r);
    return false;
  }
  VkPushConstantRange push{};
  push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push.size = sizeof(ChunkPush);
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  if (VkResult r = vk.vkCreatePipelineLayout(device_, &layout_info, nullptr, &pipeline_layout_); r != VK_SUCCESS) {
    *why_not = "vkCreatePipelineLayout: " + vk_result_name(r);
    return false;
  }

  full_subgroups_ = full_subgroups;
  return true;
}

VkPipeline Context::pipeline(Shader shader, int param_dtype, int grad_dtype, std::string* why, uint32_t features) {
  const int s = static_cast<int>(shader);
  if (shader != Shader::kReduce && shader != Shader::kApply) param_dtype = 0;
  if (shader == Shader::kCopy || shader == Shader::kColumnTotals || shader == Shader::kFinalize) grad_dtype = 0;
  const bool specialized = specialize_ && (shader == Shader::kReduce || shader == Shader::kApply);
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  VkPipeline& slot = specialized ? specialized_[{(s * 3 + param_dtype) * 3 + grad_dtype, features}]
                                 : pipelines_[s][param_dtype][grad_dtype];
  if (slot) return slot;
  static const char* const kShaders[] = {"lv_reduce", "lv_apply", "lv_factor_sums", "lv_copy", "lv_column_totals",
                                             "lv_finalize"};
  static const char* const kDtypes[] = {"f32", "bf16", "f16"};
  const std::string name = std::string(kShaders[s]) + "_p" + kDtypes[param_dtype] + "_g" + kDtypes[grad_dtype] +
                           shader_suffix_ + (specialized ? "_sp" : "");
  // LV_FEATURES, constant_id 0 of the _sp shaders.
  const VkSpecializationMapEntry entry{0, 0, sizeof(uint32_t)};
  const VkSpecializationInfo specialization{1, &entry, sizeof(uint32_t), &features};
  const auto& vk = api_;
  for (const EmbeddedShader& e : embedded_vulkan_shaders()) {
    if (name != e.name) continue;
    VkShaderModuleCreateInfo module_info{};
    module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    module_info.codeSize = static_cast<size_t>(e.end - e.begin);
    module_info.pCode = reinterpret_cast<const uint32_t*>(e.begin);
    VkShaderModule module = VK_NULL_HANDLE;
    if (VkResult r = vk.vkCreateShaderModule(device_, &module_info, nullptr, &module); r != VK_SUCCESS) {
      *why = "vkCreateShaderModule(" + name + "): " + vk_result_name(r);
      return VK_NULL_HANDLE;
    }
    VkComputePipelineCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    if (specialized) info.stage.pSpecializationInfo = &specialization;
    // Whole subgroups, so the fixed-order butterfly sees every lane.
    if (full_subgroups_) info.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
    info.layout = pipeline_layout_;
    const VkResult r = vk.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &slot);
    vk.vkDestroyShaderModule(device_, module, nullptr);
    if (r != VK_SUCCESS) {
      slot = VK_NULL_HANDLE;
      *why = "vkCreateComputePipelines(" + name + "): " + vk_result_name(r);
    }
    return slot;
  }
  *why = "shader " + name + " is not embedded in this build";
  return VK_NULL_HANDLE;
}

Context::~Context() {
  auto& vk = api_;
  if (device_) {
    vk.vkDeviceWaitIdle(device_);
    for (auto& shader : pipelines_)
      for (auto& row : shader)
        for (VkPipeline p : row)
          if (p) vk.vkDestroyPipeline(device_, p, nullptr);
    for (auto& [key, p] : specialized_)
      if (p) vk.vkDestroyPipeline(device_, p, nullptr);
    for (VkBuffer b : {arena_.host, arena_.device})
      if (b) vk.vkDestroyBuffer(device_, b, nullptr);
    for (VkDeviceMemory m : {arena_.host_memory, arena_.device_memory})
      if (m) vk.vkFreeMemory(device_, m, nullptr);
    if (pipeline_layout_) vk.vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
    if (set_layout_) vk.vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    if (pool_) vk.vkDestroyCommandPool(device_, pool_, nullptr);
    vk.vkDestroyDevice(device_, nullptr);
  }
  if (messenger_ && vk.vkDestroyDebugUtilsMessengerEXT) vk.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) vk.vkDestroyInstance(instance_, nullptr);
  // The loader stays loaded: drivers may keep threads that run its code.
}

}  // namespace luminav::vulkan
