// The Vulkan loader, instance, device choice, queue and compute pipelines of
// the backend, created once per process on first use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "optim/vulkan/vulkan_api.h"

namespace luminav::vulkan {

// One physical device as `luminamoon info` describes it.
struct DeviceReport {
  std::string name;
  std::string type;        // "integrated GPU", "discrete GPU", "CPU", ...
  std::string api;         // "1.3.230"
  bool usable = false;     // has what the shaders need
  bool chosen = false;     // the backend runs on it
  bool auto_routed = false;  // backend="auto" sends host tensors to it
  std::string why;         // why it is (not) used, one line
};

// SPIR-V compiled by glslc at build time (generated embedded_vulkan_shaders.cc).
struct EmbeddedShader {
  const char* name;
  const uint8_t* begin;
  const uint8_t* end;
};
std::span<const EmbeddedShader> embedded_vulkan_shaders();

// The compute shaders (shaders/*.comp), each compiled per dtype pair.
// kCopy: the benchmark's fp32 copy (shaders/lv_copy.comp); kColumnTotals:
// TD-CLM's column sums from their row blocks (shaders/lv_column_totals.comp).
// kFinalize: the asynchronous step's finalize (shaders/lv_finalize.comp).
enum class Shader { kReduce = 0, kApply = 1, kFactorSums = 2, kCopy = 3, kColumnTotals = 4, kFinalize = 5 };

class Context {
 public:
  // The process's context, or nullptr with `why_not` set (the loader, an
  // instance, a usable device or a pipeline is missing). Thread-safe.
  static Context* get(std::string* why_not);
  // Every device found (also when none is usable), for introspection.
  static const std::vector<DeviceReport>& devices();

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Api& api() const { return api_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  VkCommandPool command_pool() const { return pool_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  // The pipeline of `shader` for (param, grad) dtypes (0 f32, 1 bf16, 2 f16;
  // kFactorSums reads only the gradient, kCopy and kColumnTotals are fp32 only), created on first use; null with
  // `why` set when the driver refuses it. Thread-safe. `features` (kReduce
  // and kApply; vulkan_layout.h: shader_features) names the optional paths
  // the job may take: on a CPU device the pipeline is specialized to them
  // (Note [CPU specialization] in lv_common.glsl); elsewhere it is ignored.
  VkPipeline pipeline(Shader shader, int param_dtype, int grad_dtype, std::string* why,
                      uint32_t features = 0xffffffffu);
  // Reduce and apply pipelines are specialized per job (a CPU device, not
  // turned off by LUMINAV_VULKAN_SPECIALIZE=0).
  bool specializes() const { return specialize_; }
  const std::string& device_name() const { return device_name_; }
  VkPhysicalDeviceType device_type() const { return device_type_; }
  // Host memory import (VK_EXT_external_memory_host) is offered and not
  // turned off by LUMINAV_VULKAN_IMPORT=0.
  bool host_import() const { return host_import_; }
  VkDeviceSize import_alignment() const { return import_alignment_; }
  VkDeviceSize storage_alignment() const { return storage_alignment_; }
  // Bytes one descriptor may cover (maxStorageBufferRange, at most one
  // allocation; LUMINAV_VULKAN_MAX_RANGE lowers it, for tests).
  VkDeviceSize max_range() const { return max_range_; }
  // Memory allocations alive at once (maxMemoryAllocationCount;
  // LUMINAV_VULKAN_MAX_ALLOCATIONS lowers it, for tests).
  uint32_t max_allocations() const { return max_allocations_; }
  uint32_t subgroup_size() const { return subgroup_size_; }
  float timestamp_period_ns() const { return timestamp_period_; }
  bool auto_routed() const { return auto_routed_; }
  // The shader set in use (lv_common.glsl): the hash in 64-bit integers, and
  // fp32 subnormals kept by the float-controls execution modes.
  bool int64_hash() const { return int64_; }
  bool float_controls() const { return float_controls_; }

  // Memory type index with these flags among `type_bits`, or -1.
  int memory_type(uint32_t type_bits, VkMemoryPropertyFlags flags) const;

  // The passes' arena of small arrays (constants, partials, sums, factors;
  // vulkan_passes.cc): host memory that the host fills and reads, and the
  // device-local copy that the shaders use (a discrete GPU would otherwise
  // read the constants and factors across PCIe in every thread), kept and
  // grown between passes. The device copy may be longer: what lies past
  // `bytes` is device-only scratch (TD-CLM's column sums per row block).
  struct Arena {
    VkBuffer host = VK_NULL_HANDLE, device = VK_NULL_HANDLE;
    VkDeviceMemory host_memory = VK_NULL_HANDLE, device_memory = VK_NULL_HANDLE;
    void* mapped = nullptr;
    VkDeviceSize bytes = 0;         // host and device
    VkDeviceSize device_bytes = 0;  // device, >= bytes
  };
  Arena& arena() { return arena_; }
  // Held by a pass from its first allocation to its results: the queue, the
  // command pool and the arena are used by one thread at a time.
  std::mutex& pass_mutex() { return pass_mutex_; }

 private:
  Context() = default;
  bool init(std::string* why_not);

  void* library_ = nullptr;
  Api api_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  std::mutex pipelines_mutex_;
  std::mutex pass_mutex_;
  Arena arena_;
  VkPipeline pipelines_[6][3][3]{};  // [shader][param][grad]
  // Specialized pipelines by (shader, param, grad) and features.
  std::map<std::pair<int, uint32_t>, VkPipeline> specialized_;
  bool specialize_ = false;
  bool full_subgroups_ = false;
  VkPhysicalDeviceMemoryProperties memory_{};
  std::string device_name_;
  VkPhysicalDeviceType device_type_ = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  bool host_import_ = false;
  bool auto_routed_ = false;
  bool int64_ = true;
  bool float_controls_ = false;
  std::string shader_suffix_;  // "", "_i32", "_fc", "_i32_fc"
  VkDeviceSize import_alignment_ = 4096;
  VkDeviceSize storage_alignment_ = 256;
  VkDeviceSize max_range_ = 0;
  uint32_t max_allocations_ = 4096;
  uint32_t subgroup_size_ = 0;
  float timestamp_period_ = 1.0f;
  std::vector<DeviceReport> reports_;
  friend struct ContextHolder;
};

}  // namespace luminav::vulkan
