// Everything one submission creates (buffers, imports, staging, descriptor
// sets, its command buffer and fence), released when it is destroyed: the
// synchronous passes (vulkan_passes.cc) wait for it at once, the
// asynchronous step (vulkan_async.cc) keeps it until its fence signals.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "optim/vulkan/vulkan_context.h"
#include "optim/vulkan/vulkan_layout.h"
#include "optim/vulkan/vulkan_passes.h"

namespace luminav::vulkan {

inline size_t dtype_bytes(int dtype) { return dtype == LUMINAV_DTYPE_F32 ? 4 : 2; }
inline VkDeviceSize round_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }
inline size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

// A range of memory a descriptor points at, and the element shift of the
// chunk's element 0 inside it.
struct Bound {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, range = VK_WHOLE_SIZE;
  uint32_t shift = 0;
};

// Staged host array: copied into `mapped` before the submission and, when
// written, back after it.
struct Staged {
  void* host;
  void* mapped;
  size_t bytes;
  bool copy_back;
};

// LUMINAV_STATUS_* for a failed Vulkan call, `why` = "what: VK_ERROR_...".
int fail(VkResult r, const std::string& what, std::string* why);

// A storage, transfer and indirect-argument buffer of `bytes` bound to new
// memory of a type with `want` (and `prefer` where one has it); host-visible
// memory is mapped at *mapped. On failure nothing is kept.
int create_buffer(Context& c, VkDeviceSize bytes, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer,
                  VkBuffer* out, VkDeviceMemory* out_memory, void** mapped, std::string* why);

inline constexpr VkMemoryPropertyFlags kHostCoherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

class Batch {
 public:
  explicit Batch(Context& c) : c_(c), vk_(c.api()), dev_(c.device()) {}
  // Never frees what a submission still uses: waits for it first.
  ~Batch() {
    std::string ignored;
    if (submitted_ && !finished_) wait(&ignored);
    if (fence_) vk_.vkDestroyFence(dev_, fence_, nullptr);
    if (cmd_) vk_.vkFreeCommandBuffers(dev_, c_.command_pool(), 1, &cmd_);
    if (pool_) vk_.vkDestroyDescriptorPool(dev_, pool_, nullptr);
    for (VkBuffer b : buffers_) vk_.vkDestroyBuffer(dev_, b, nullptr);
    for (VkDeviceMemory m : memories_) vk_.vkFreeMemory(dev_, m, nullptr);
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // A host-visible coherent buffer (a staging buffer), mapped at *mapped.
  int host_buffer(VkDeviceSize bytes, VkBuffer* out, void** mapped, std::string* why) {
    bytes = round_up(std::max<VkDeviceSize>(bytes, 16), 16);
    VkDeviceMemory memory = VK_NULL_HANDLE;
    if (int code = create_buffer(c_, bytes, kHostCoherent, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, out, &memory, mapped,
                                 why);
        code) {
      return code;
    }
    buffers_.push_back(*out);
    memories_.push_back(memory);
    return LUMINAV_STATUS_OK;
  }

  // Copies `regions` between buffers, then makes them visible to the next
  // stage (the shaders after an upload, the host after a download).
  void copy(VkBuffer from, VkBuffer to, std::vector<VkBufferCopy> regions, bool to_shaders) {
    std::erase_if(regions, [](const VkBufferCopy& r) { return r.size == 0; });  // a 0-byte region is invalid
    if (regions.empty()) return;
    if (!to_shaders) barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                             VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    vk_.vkCmdCopyBuffer(cmd_, from, to, static_cast<uint32_t>(regions.size()), regions.data());
    if (to_shaders) barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }

  // Zeroes `regions` of `buffer` (offsets and sizes multiples of 4); the
  // next copy(..., true) makes them visible to the shaders.
  void zero(VkBuffer buffer, const std::vector<VkBufferCopy>& regions) {
    for (const VkBufferCopy& r : regions)
      if (r.size) vk_.vkCmdFillBuffer(cmd_, buffer, r.dstOffset, r.size, 0u);
  }

  // What the dispatches so far wrote is visible to the next ones.
  void shader_barrier() {
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }

  // Host memory read in place: the page-aligned cover of [ptr, ptr+bytes)
  // imported as one buffer. False (nothing kept) when the driver refuses.
  bool import(void* ptr, size_t bytes, size_t element_bytes, Bound* out) {
    if (!c_.host_import() || vk_.vkGetMemoryHostPointerPropertiesEXT == nullptr) return false;
    const VkDeviceSize a = c_.import_alignment();
    const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
    const uintptr_t lo = begin / a * a;
    const VkDeviceSize size = round_up(begin + bytes, a) - lo;
    if (size > c_.max_range()) return false;
    const auto handle = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkMemoryHostPointerPropertiesEXT props{};
    props.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
    if (vk_.vkGetMemoryHostPointerPropertiesEXT(dev_, handle, reinterpret_cast<void*>(lo), &props) != VK_SUCCESS) {
      return false;
    }
    VkExternalMemoryBufferCreateInfo external{};
    external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
    external.handleTypes = handle;
    VkBufferCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.pNext = &external;
    info.size = size;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkBuffer buffer = VK_NULL_HANDLE;
    if (vk_.vkCreateBuffer(dev_, &info, nullptr, &buffer) != VK_SUCCESS) return false;
    VkMemoryRequirements req;
    vk_.vkGetBufferMemoryRequirements(dev_, buffer, &req);
    // Coherent memory only: the host's writes before the submission and the
    // device's before the fence need no flush.
    const int type = c_.memory_type(req.memoryTypeBits & props.memoryTypeBits,
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    VkImportMemoryHostPointerInfoEXT imported{};
    imported.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
    imported.handleType = handle;
    imported.pHostPointer = reinterpret_cast<void*>(lo);
    VkMemoryAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.pNext = &imported;
    alloc.allocationSize = size;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    bool ok = type >= 0 && req.size <= size;
    if (ok) {
      alloc.memoryTypeIndex = static_cast<uint32_t>(type);
      ok = vk_.vkAllocateMemory(dev_, &alloc, nullptr, &memory) == VK_SUCCESS;
    }
    if (ok && vk_.vkBindBufferMemory(dev_, buffer, memory, 0) != VK_SUCCESS) {
      vk_.vkFreeMemory(dev_, memory, nullptr);
      ok = false;
    }
    if (!ok) {
      vk_.vkDestroyBuffer(dev_, buffer, nullptr);
      return false;
    }
    buffers_.push_back(buffer);
    memories_.push_back(memory);
    out->buffer = buffer;
    out->offset = 0;
    out->range = size;
    out->shift = static_cast<uint32_t>((begin - lo) / element_bytes);
    return true;
  }

  // One chunk of one array: device buffer, imported, or staged.
  int bind(const Source& src, size_t first, size_t count, size_t element_bytes, bool written, Bound* out,
           PassStats& stats, std::string* why) {
    const size_t bytes = count * element_bytes;
    if (src.buffer != VK_NULL_HANDLE) {
      const VkDeviceSize at = src.offset + first * element_bytes;
      const VkDeviceSize a = c_.storage_alignment();
      out->buffer = src.buffer;
      out->offset = at / a * a;
      out->shift = static_cast<uint32_t>((at - out->offset) / element_bytes);
      out->range = (at - out->offset) + round_up(bytes, 4);
      return LUMINAV_STATUS_OK;
    }
    char* host = static_cast<char*>(src.host) + first * element_bytes;
    if (import(host, bytes, element_bytes, out)) {
      ++stats.imported;
      return LUMINAV_STATUS_OK;
    }
    if (before_staging_) {
      // Once, before the first staged copy (the asynchronous step: the host
      // arrays hold the steps in flight's results only once they are done).
      auto hook = std::move(before_staging_);
      before_staging_ = nullptr;
      if (int code = hook(why); code) return code;
    }
    void* mapped = nullptr;
    if (int code = host_buffer(bytes, &out->buffer, &mapped, why); code) return code;
    std::memcpy(mapped, host, bytes);
    out->offset = 0;
    out->range = VK_WHOLE_SIZE;
    out->shift = 0;
    staged_.push_back({host, mapped, bytes, written});
    ++stats.staged;
    stats.staged_bytes += bytes * (written ? 2 : 1);
    return LUMINAV_STATUS_OK;
  }

  int begin(uint32_t sets, std::string* why) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * kBindingCount};
    VkDescriptorPoolCreateInfo pool{};
    pool.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pool.maxSets = sets;
    pool.poolSizeCount = 1;
    pool.pPoolSizes = &size;
    if (VkResult r = vk_.vkCreateDescriptorPool(dev_, &pool, nullptr, &pool_); r != VK_SUCCESS) {
      return fail(r, "vkCreateDescriptorPool", why);
    }
    VkCommandBufferAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    alloc.commandPool = c_.command_pool();
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    if (VkResult r = vk_.vkAllocateCommandBuffers(dev_, &alloc, &cmd_); r != VK_SUCCESS) {
      cmd_ = VK_NULL_HANDLE;
      return fail(r, "vkAllocateCommandBuffers", why);
    }
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (VkResult r = vk_.vkBeginCommandBuffer(cmd_, &begin); r != VK_SUCCESS) return fail(r, "vkBeginCommandBuffer", why);
    return LUMINAV_STATUS_OK;
  }

  int dispatch(VkPipeline pipeline, const Bound (&bindings)[kBindingCount], const ChunkPush& push, uint32_t x,
               uint32_t y, std::string* why) {
    if (int code = bind_set(pipeline, bindings, &push, sizeof push, why); code) return code;
    vk_.vkCmdDispatch(cmd_, x, y, 1);
    return LUMINAV_STATUS_OK;
  }

  // Ends the command buffer and submits it with a fence; returns at once.
  int submit(std::string* why) {
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
    if (VkResult r = vk_.vkEndCommandBuffer(cmd_); r != VK_SUCCESS) return fail(r, "vkEndCommandBuffer", why);
    VkFenceCreateInfo fence{};
    fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    if (VkResult r = vk_.vkCreateFence(dev_, &fence, nullptr, &fence_); r != VK_SUCCESS) {
      fence_ = VK_NULL_HANDLE;
      return fail(r, "vkCreateFence", why);
    }
    VkSubmitInfo submit{};
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd_;
    if (VkResult r = vk_.vkQueueSubmit(c_.queue(), 1, &submit, fence_); r != VK_SUCCESS) {
      return fail(r, "vkQueueSubmit", why);
    }
    submitted_ = true;
    return LUMINAV_STATUS_OK;
  }

  // The submission has run (its fence signalled), without waiting.
  bool done() {
    if (!submitted_ || finished_) return true;
    finished_ = vk_.vkGetFenceStatus(dev_, fence_) == VK_SUCCESS;
    return finished_;
  }

  // Waits for the submission (nothing to wait for when none was made).
  int wait(std::string* why) {
    if (!submitted_ || finished_) return LUMINAV_STATUS_OK;
    if (VkResult r = vk_.vkWaitForFences(dev_, 1, &fence_, VK_TRUE, UINT64_MAX); r != VK_SUCCESS) {
      return fail(r, "vkWaitForFences", why);
    }
    finished_ = true;
    return LUMINAV_STATUS_OK;
  }

  // Waits at most `timeout_ns` for the submission; whether it is complete.
  // Only for the exit handler, which must not hang on a driver that is being
  // torn down under it (Note [Vulkan steps at exit]).
  bool finished_within(uint64_t timeout_ns) {
    if (!submitted_ || finished_) return true;
    if (vk_.vkWaitForFences(dev_, 1, &fence_, VK_TRUE, timeout_ns) != VK_SUCCESS) return false;
    finished_ = true;
    return true;
  }

  // Once done: the staged arrays that the shaders wrote go back to the host.
  void copy_back() {
    for (const Staged& s : staged_) {
      if (s.copy_back) std::memcpy(s.host, s.mapped, s.bytes);
    }
  }

  // Submits, waits, copies the staged arrays back (the synchronous passes).
  int submit_and_wait(std::string* why) {
    if (int code = submit(why); code) return code;
    if (int code = wait(why); code) return code;
    copy_back();
    return LUMINAV_STATUS_OK;
  }

  // Runs `hook` once before the first host array is staged (copied), not
  // when every array is imported or a device buffer.
  void before_staging(std::function<int(std::string*)> hook) { before_staging_ = std::move(hook); }

  // A device-local buffer of `bytes` owned by the batch.
  int device_buffer(VkDeviceSize bytes, VkBuffer* out, std::string* why) {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    if (int code = create_buffer(c_, round_up(std::max<VkDeviceSize>(bytes, 16), 16),
                                 VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, out, &memory, nullptr, why);
        code) {
      return code;
    }
    buffers_.push_back(*out);
    memories_.push_back(memory);
    return LUMINAV_STATUS_OK;
  }

  // What every earlier submission on the queue wrote is visible to this
  // one's commands (the asynchronous steps follow each other without a wait).
  void after_earlier_submissions() {
    barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
            VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
  }

  // What the dispatches so far wrote is visible to later dispatches and to
  // their indirect arguments.
  void indirect_barrier() {
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_INDIRECT_COMMAND_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }

  // dispatch() with the group counts read from `args` at `offset` when the
  // command runs (three uint32).
  int dispatch_indirect(VkPipeline pipeline, const Bound (&bindings)[kBindingCount], const ChunkPush& push,
                        VkBuffer args, VkDeviceSize offset, std::string* why) {
    if (int code = bind_set(pipeline, bindings, &push, sizeof push, why); code) return code;
    vk_.vkCmdDispatchIndirect(cmd_, args, offset);
    return LUMINAV_STATUS_OK;
  }

  // dispatch() with push constants of another layout of the same size.
  int dispatch_raw(VkPipeline pipeline, const Bound (&bindings)[kBindingCount], const void* push, uint32_t bytes,
                   uint32_t x, std::string* why) {
    if (int code = bind_set(pipeline, bindings, push, bytes, why); code) return code;
    vk_.vkCmdDispatch(cmd_, x, 1, 1);
    return LUMINAV_STATUS_OK;
  }

 private:
  int bind_set(VkPipeline pipeline, const Bound (&bindings)[kBindingCount], const void* push, uint32_t bytes,
               std::string* why) {
    VkDescriptorBufferInfo ranges[kBindingCount];
    for (uint32_t b = 0; b < kBindingCount; ++b) ranges[b] = {bindings[b].buffer, bindings[b].offset, bindings[b].range};
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (int code = make_descriptor_set(c_, pool_, ranges, &set, why); code) return code;
    vk_.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vk_.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, c_.pipeline_layout(), 0, 1, &set, 0, nullptr);
    vk_.vkCmdPushConstants(cmd_, c_.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, bytes, push);
    return LUMINAV_STATUS_OK;
  }

  void barrier(VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
    VkMemoryBarrier b{};
    b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    b.srcAccessMask = src;
    b.dstAccessMask = dst;
    vk_.vkCmdPipelineBarrier(cmd_, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
  }

  Context& c_;
  const Api& vk_;
  VkDevice dev_;
  std::vector<VkBuffer> buffers_;
  std::vector<VkDeviceMemory> memories_;
  std::vector<Staged> staged_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool submitted_ = false, finished_ = false;
  std::function<int(std::string*)> before_staging_;
};

// TD-CLM row/factored, round 0, one chunk whose bindings are `b`:
// lv_factor_sums.comp (the sums of g^2 of the chunk's rows into `rows`;
// factored, of its columns per row block into *blocks), then, factored,
// lv_column_totals.comp adding the blocks onto *totals (zeroed before the
// tensor's first chunk), after a barrier (the blocks, the chunk before).
int record_factor_sums(Context& context, Batch& batch, const TensorJob& job, const Bound (&b)[kBindingCount],
                       const ChunkPush& push, const Bound& rows, const Bound* blocks, const Bound* totals,
                       std::string* why);  // vulkan_passes.cc

}  // namespace luminav::vulkan
