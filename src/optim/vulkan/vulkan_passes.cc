// Chunks, memory (import, staging or device buffers), descriptor sets, one
// command buffer per batch of tensors, and the host's fixed-order sums.
#include "optim/vulkan/vulkan_passes.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace luminav::vulkan {
namespace {

size_t dtype_bytes(int dtype) { return dtype == LUMINAV_DTYPE_F32 ? 4 : 2; }
VkDeviceSize round_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

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

int fail(VkResult r, const std::string& what, std::string* why) {
  *why = what + ": " + vk_result_name(r);
  return (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) ? LUMINAV_STATUS_OUT_OF_MEMORY
                                                                                 : LUMINAV_STATUS_DRIVER_ERROR;
}

// A storage and transfer buffer of `bytes` bound to new memory of a type with
// `want` (and `prefer` where one has it); host-visible memory is mapped at
// *mapped. On failure nothing is kept.
int create_buffer(Context& c, VkDeviceSize bytes, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer,
                  VkBuffer* out, VkDeviceMemory* out_memory, void** mapped, std::string* why) {
  const Api& vk = c.api();
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (VkResult r = vk.vkCreateBuffer(c.device(), &info, nullptr, &buffer); r != VK_SUCCESS) {
    return fail(r, "vkCreateBuffer", why);
  }
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(c.device(), buffer, &req);
  int type = c.memory_type(req.memoryTypeBits, want | prefer);
  if (type < 0) type = c.memory_type(req.memoryTypeBits, want);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  int code = LUMINAV_STATUS_OK;
  if (type < 0) {
    *why = "no memory type with flags " + std::to_string(want) + " on " + c.device_name();
    code = LUMINAV_STATUS_DRIVER_ERROR;
  } else {
    VkMemoryAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = static_cast<uint32_t>(type);
    if (VkResult r = vk.vkAllocateMemory(c.device(), &alloc, nullptr, &memory); r != VK_SUCCESS) {
      memory = VK_NULL_HANDLE;
      code = fail(r, "vkAllocateMemory(" + std::to_string(req.size) + " bytes)", why);
    } else if (VkResult b = vk.vkBindBufferMemory(c.device(), buffer, memory, 0); b != VK_SUCCESS) {
      code = fail(b, "vkBindBufferMemory", why);
    } else if (mapped) {
      if (VkResult m = vk.vkMapMemory(c.device(), memory, 0, VK_WHOLE_SIZE, 0, mapped); m != VK_SUCCESS) {
        code = fail(m, "vkMapMemory", why);
      }
    }
  }
  if (code) {
    if (memory) vk.vkFreeMemory(c.device(), memory, nullptr);
    vk.vkDestroyBuffer(c.device(), buffer, nullptr);
    return code;
  }
  *out = buffer;
  *out_memory = memory;
  return LUMINAV_STATUS_OK;
}

constexpr VkMemoryPropertyFlags kHostCoherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

// The context's arena, grown to at least `bytes` mirrored in host memory and
// `device_bytes` (>= bytes) on the device (Context::Arena).
int ensure_arena(Context& c, VkDeviceSize bytes, VkDeviceSize device_bytes, std::string* why) {
  Context::Arena& a = c.arena();
  if (a.bytes >= bytes && a.device_bytes >= device_bytes) return LUMINAV_STATUS_OK;
  const Api& vk = c.api();
  for (VkBuffer b : {a.host, a.device})
    if (b) vk.vkDestroyBuffer(c.device(), b, nullptr);
  for (VkDeviceMemory m : {a.host_memory, a.device_memory})
    if (m) vk.vkFreeMemory(c.device(), m, nullptr);
  a = Context::Arena{};
  bytes = std::max<VkDeviceSize>(round_up(bytes, 65536), 1 << 20);
  device_bytes = std::max(bytes, round_up(device_bytes, 65536));
  Context::Arena next;
  if (int code = create_buffer(c, bytes, kHostCoherent, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, &next.host,
                               &next.host_memory, &next.mapped, why);
      code) {
    return code;
  }
  if (int code = create_buffer(c, device_bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, &next.device,
                               &next.device_memory, nullptr, why);
      code) {
    vk.vkDestroyBuffer(c.device(), next.host, nullptr);
    vk.vkFreeMemory(c.device(), next.host_memory, nullptr);
    return code;
  }
  next.bytes = bytes;
  next.device_bytes = device_bytes;
  a = next;
  return LUMINAV_STATUS_OK;
}

}  // namespace

int make_descriptor_set(Context& c, VkDescriptorPool pool, const VkDescriptorBufferInfo (&ranges)[kBindingCount],
                        VkDescriptorSet* out, std::string* why) {
  VkDescriptorSetAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = pool;
  alloc.descriptorSetCount = 1;
  const VkDescriptorSetLayout layout = c.set_layout();
  alloc.pSetLayouts = &layout;
  if (VkResult r = c.api().vkAllocateDescriptorSets(c.device(), &alloc, out); r != VK_SUCCESS) {
    return fail(r, "vkAllocateDescriptorSets", why);
  }
  VkWriteDescriptorSet writes[kBindingCount]{};
  for (uint32_t b = 0; b < kBindingCount; ++b) {
    writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[b].dstSet = *out;
    writes[b].dstBinding = b;
    writes[b].descriptorCount = 1;
    writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[b].pBufferInfo = &ranges[b];
  }
  c.api().vkUpdateDescriptorSets(c.device(), kBindingCount, writes, 0, nullptr);
  return LUMINAV_STATUS_OK;
}

namespace {

// Everything a batch creates, released when it goes out of scope.
class Batch {
 public:
  explicit Batch(Context& c) : c_(c), vk_(c.api()), dev_(c.device()) {}
  ~Batch() {
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
    VkDescriptorBufferInfo ranges[kBindingCount];
    for (uint32_t b = 0; b < kBindingCount; ++b) ranges[b] = {bindings[b].buffer, bindings[b].offset, bindings[b].range};
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (int code = make_descriptor_set(c_, pool_, ranges, &set, why); code) return code;
    vk_.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vk_.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, c_.pipeline_layout(), 0, 1, &set, 0, nullptr);
    vk_.vkCmdPushConstants(cmd_, c_.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    vk_.vkCmdDispatch(cmd_, x, y, 1);
    return LUMINAV_STATUS_OK;
  }

  // Ends, submits, waits; then copies the staged arrays that were written back.
  int submit_and_wait(std::string* why) {
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
    if (VkResult r = vk_.vkWaitForFences(dev_, 1, &fence_, VK_TRUE, UINT64_MAX); r != VK_SUCCESS) {
      return fail(r, "vkWaitForFences", why);
    }
    for (const Staged& s : staged_) {
      if (s.copy_back) std::memcpy(s.host, s.mapped, s.bytes);
    }
    return LUMINAV_STATUS_OK;
  }

 private:
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
};

size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

// One chunk of a job: elements [first, first + count), rows [row0, row0 + rows).
struct Chunk {
  size_t job, first, count, row0, rows;
  // Arena offsets (bytes): blocks_at is device-only scratch (the chunk's
  // column sums per row block), totals_at the job's column totals.
  size_t partials_at = 0, rows_at = 0, blocks_at = 0, totals_at = 0, factor_at = 0;
};

}  // namespace

size_t chunk_elements(const Context& context, const core::MomentLayout& layout) {
  // Every array of a chunk, imported with up to an alignment unit either side,
  // stays within one descriptor range; tiles and groups within kMaxGroups.
  const VkDeviceSize slack = 2 * std::max<VkDeviceSize>(context.import_alignment(), context.storage_alignment());
  size_t n = context.max_range() > slack ? static_cast<size_t>((context.max_range() - slack) / 4) : 0;
  n = std::min<size_t>(n, static_cast<size_t>(kMaxGroups) * kTileElements);
  if (core::has_row_factor(layout)) {
    const size_t cols = static_cast<size_t>(layout.cols);
    size_t rows = n / cols;
    // The bound of the earlier dispatch of one workgroup row per row block,
    // kept so that the chunks, and so the order of the column sums, stay the same.
    rows = std::min<size_t>(rows, static_cast<size_t>(kMaxGroups - 1) * kRowBlock);
    n = rows * cols;
  }
  return n;
}

int run_pass(Context& context, Pass pass, std::span<TensorJob> jobs, std::string* why, PassStats* stats_out) {
  std::lock_guard<std::mutex> lock(context.pass_mutex());
  PassStats stats;
  // Plan the chunks and the arena of small buffers (constants, partials,
  // row and column sums, factors).
  std::vector<Chunk> chunks;
  const VkDeviceSize align = std::max<VkDeviceSize>(context.storage_alignment(), 16);
  VkDeviceSize arena = round_up(jobs.size() * kParamsSlotBytes, align);
  VkDeviceSize scratch = 0;  // device-only, placed after the mirrored part
  std::vector<size_t> totals_at(jobs.size(), 0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const TensorJob& job = jobs[j];
    const bool rows = core::has_row_factor(job.layout);
    const size_t per = chunk_elements(context, job.layout);
    if (per == 0) {
      *why = "a row of " + std::to_string(job.layout.cols) + " elements does not fit one Vulkan storage buffer (" +
             std::to_string(context.max_range()) + " bytes) on " + context.device_name();
      return LUMINAV_STATUS_INVALID_ARGUMENT;
    }
    for (size_t first = 0; first < job.num_elements; first += per) {
      Chunk c{};
      c.job = j;
      c.first = first;
      c.count = std::min(per, job.num_elements - first);
      if (rows) {
        c.row0 = first / job.layout.cols;
        c.rows = c.count / job.layout.cols;
      }
      const bool factor_sums = pass == Pass::kReduce && rows && job.params.want_grad_sums;
      if (pass == Pass::kReduce) {
        c.partials_at = arena;
        arena = round_up(arena + div_up(c.count, kTileElements) * sizeof(TilePartial), align);
      }
      if (factor_sums) {
        c.rows_at = arena;
        arena = round_up(arena + c.rows * sizeof(double), align);
        if (job.layout.kind == core::SecondMoment::kFactored) {
          if (first == 0) {
            totals_at[j] = arena;
            arena = round_up(arena + job.layout.cols * sizeof(double), align);
          }
          c.totals_at = totals_at[j];
          c.blocks_at = scratch;
          scratch = round_up(scratch + div_up(c.rows, kRowBlock) * job.layout.cols * sizeof(double), align);
        }
      }
      const bool reads_factor = rows && (pass == Pass::kApply || job.params.want_update_sums);
      if (reads_factor) {
        c.factor_at = arena;
        const size_t floats = c.rows + (job.layout.kind == core::SecondMoment::kFactored ? job.layout.cols : 0);
        arena = round_up(arena + floats * sizeof(float), align);
      }
      chunks.push_back(c);
    }
  }
  stats.chunks = chunks.size();

  Batch batch(context);
  if (int code = ensure_arena(context, arena, arena + scratch, why); code) return code;
  for (Chunk& c : chunks) c.blocks_at += arena;
  const Context::Arena& area = context.arena();
  char* base = static_cast<char*>(area.mapped);
  std::memset(base, 0, static_cast<size_t>(arena));
  for (size_t j = 0; j < jobs.size(); ++j) std::memcpy(base + j * kParamsSlotBytes, &jobs[j].params, sizeof(StepParams));
  // The shaders use the device-local copy: what the host wrote goes up
  // first (constants, factors), what they wrote comes back last (partials, sums).
  std::vector<VkBufferCopy> upload{{0, 0, jobs.size() * kParamsSlotBytes}}, download;
  auto arena_bound = [&](VkDeviceSize at, VkDeviceSize bytes) {
    Bound b;
    b.buffer = area.device;
    b.offset = at;
    b.range = std::max<VkDeviceSize>(round_up(bytes, 16), 16);
    return b;
  };
  // Unused bindings point at the arena's first constants slot.
  const Bound unused = arena_bound(0, kParamsSlotBytes);

  const uint32_t dispatches_per_chunk = 3;
  if (int code = batch.begin(static_cast<uint32_t>(chunks.size() * dispatches_per_chunk), why); code) return code;
  // The factors of every chunk are in the arena before the first dispatch.
  for (const Chunk& c : chunks) {
    const TensorJob& job = jobs[c.job];
    const bool rows = core::has_row_factor(job.layout);
    if (!rows || !(pass == Pass::kApply || job.params.want_update_sums)) continue;
    const size_t floats = c.rows + (job.layout.kind == core::SecondMoment::kFactored ? job.layout.cols : 0);
    float* f = reinterpret_cast<float*>(base + c.factor_at);
    std::memcpy(f, job.row_factor + c.row0, c.rows * sizeof(float));
    if (job.layout.kind == core::SecondMoment::kFactored) {
      std::memcpy(f + c.rows, job.col_over_rho, job.layout.cols * sizeof(float));
    }
    upload.push_back({c.factor_at, c.factor_at, floats * sizeof(float)});
  }
  // The column totals start from zero (the shaders add every chunk's blocks).
  std::vector<VkBufferCopy> totals;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (pass == Pass::kReduce && jobs[j].params.want_grad_sums && jobs[j].layout.kind == core::SecondMoment::kFactored) {
      totals.push_back({totals_at[j], totals_at[j], jobs[j].layout.cols * sizeof(double)});
    }
  }
  batch.zero(area.device, totals);
  batch.copy(area.host, area.device, upload, true);
  for (Chunk& c : chunks) {
    TensorJob& job = jobs[c.job];
    const int pd = job.param_dtype, gd = job.grad_dtype;
    const bool elementwise = job.layout.kind == core::SecondMoment::kElementwise;
    const bool factored = job.layout.kind == core::SecondMoment::kFactored;
    const bool rows = core::has_row_factor(job.layout);
    const bool update_sums = pass == Pass::kReduce && job.params.want_update_sums;
    const bool apply = pass == Pass::kApply;
    Bound b[kBindingCount];
    for (Bound& x : b) x = unused;
    b[kBindParams] = arena_bound(c.job * kParamsSlotBytes, sizeof(StepParams));
    ChunkPush push{};
    push.n = static_cast<uint32_t>(c.count);
    push.rows = static_cast<uint32_t>(c.rows);
    push.index_base = job.index_offset + c.first;
    int code = batch.bind(job.grad, c.first, c.count, dtype_bytes(gd), false, &b[kBindGrad], stats, why);
    if (!code && (apply || update_sums)) {
      code = batch.bind(job.exp_avg, c.first, c.count, 4, apply, &b[kBindExpAvg], stats, why);
      if (!code && elementwise) code = batch.bind(job.exp_avg_sq, c.first, c.count, 4, apply, &b[kBindExpAvgSq], stats, why);
      if (!code && job.master.present()) {
        code = batch.bind(job.master, c.first, c.count, 4, apply, &b[kBindMaster], stats, why);
      }
      if (!code && (apply || !job.master.present())) {
        code = batch.bind(job.param, c.first, c.count, dtype_bytes(pd), apply, &b[kBindParam], stats, why);
      }
      if (!code && rows) {
        const size_t floats = c.rows + (factored ? job.layout.cols : 0);
        b[kBindFactor] = arena_bound(c.factor_at, floats * sizeof(float));
      }
    }
    if (code) return code;
    push.param_shift = b[kBindParam].shift;
    push.grad_shift = b[kBindGrad].shift;
    push.m_shift = b[kBindExpAvg].shift;
    push.v_shift = b[kBindExpAvgSq].shift;
    push.master_shift = b[kBindMaster].shift;
    if (apply) {
      const size_t groups = div_up(c.count, kWorkgroup);
      const uint32_t x = static_cast<uint32_t>(std::min<size_t>(groups, kMaxGroups));
      const uint32_t y = static_cast<uint32_t>(div_up(groups, x));
      VkPipeline pipeline = context.pipeline(Shader::kApply, pd, gd, why);
      code = pipeline ? batch.dispatch(pipeline, b, push, x, y, why) : LUMINAV_STATUS_DRIVER_ERROR;
    } else {
      Bound partials = arena_bound(c.partials_at, div_up(c.count, kTileElements) * sizeof(TilePartial));
      b[kBindOut] = partials;
      download.push_back({c.partials_at, c.partials_at, div_up(c.count, kTileElements) * sizeof(TilePartial)});
      VkPipeline pipeline = context.pipeline(Shader::kReduce, pd, gd, why);
      code = pipeline ? batch.dispatch(pipeline, b, push, static_cast<uint32_t>(div_up(c.count, kTileElements)), 1, why)
                      : LUMINAV_STATUS_DRIVER_ERROR;
      if (!code && rows && job.params.want_grad_sums) {
        // lv_factor_sums.comp: y = 0 the rows, y = 1 the (row block, column)
        // pairs; then lv_column_totals.comp adds the blocks onto the totals.
        b[kBindOut] = arena_bound(c.rows_at, c.rows * sizeof(double));
        const size_t blocks = factored ? div_up(c.rows, kRowBlock) : 0;
        const VkDeviceSize block_bytes = blocks * job.layout.cols * sizeof(double);
        if (factored) b[kBindOut2] = arena_bound(c.blocks_at, block_bytes);
        download.push_back({c.rows_at, c.rows_at, c.rows * sizeof(double)});
        const bool wide = job.layout.cols >= 256;
        const size_t row_groups = wide ? c.rows : div_up(c.rows, kWorkgroup);
        const size_t pair_groups = div_up(blocks * job.layout.cols, kWorkgroup);
        const uint32_t x = static_cast<uint32_t>(std::min<size_t>(std::max(row_groups, pair_groups), kMaxGroups));
        VkPipeline sums = context.pipeline(Shader::kFactorSums, 0, gd, why);
        code = sums ? batch.dispatch(sums, b, push, x, factored ? 2u : 1u, why) : LUMINAV_STATUS_DRIVER_ERROR;
        if (!code && factored) {
          b[kBindOut] = arena_bound(c.totals_at, job.layout.cols * sizeof(double));
          batch.shader_barrier();  // the blocks, and the totals of the chunk before
          const uint32_t cx = static_cast<uint32_t>(std::min<size_t>(div_up(job.layout.cols, kWorkgroup), kMaxGroups));
          VkPipeline add = context.pipeline(Shader::kColumnTotals, 0, 0, why);
          code = add ? batch.dispatch(add, b, push, cx, 1, why) : LUMINAV_STATUS_DRIVER_ERROR;
        }
      }
    }
    if (code) return code;
  }
  for (const VkBufferCopy& t : totals) download.push_back(t);
  batch.copy(area.device, area.host, download, false);
  if (int code = batch.submit_and_wait(why); code) return code;

  if (pass == Pass::kReduce) {
    // The host's part of Note [fixed combination order]: tiles in order.
    for (TensorJob& job : jobs) job.partials = luminav_partials{};
    for (const Chunk& c : chunks) {
      TensorJob& job = jobs[c.job];
      const auto* tiles = reinterpret_cast<const TilePartial*>(base + c.partials_at);
      for (size_t t = 0; t < div_up(c.count, kTileElements); ++t) {
        job.partials.grad_sq_sum += tiles[t].grad_sq;
        job.partials.update_sq_sum += tiles[t].update_sq;
        job.partials.weight_sq_sum += tiles[t].weight_sq;
        job.partials.nonfinite_count += tiles[t].nonfinite;
        job.partials.agree_count += tiles[t].agree;
      }
      if (core::has_row_factor(job.layout) && job.params.want_grad_sums) {
        std::memcpy(job.row_sq + c.row0, base + c.rows_at, c.rows * sizeof(double));
        if (job.layout.kind == core::SecondMoment::kFactored && c.first == 0) {
          std::memcpy(job.col_sq, base + c.totals_at, job.layout.cols * sizeof(double));
        }
      }
    }
  }
  if (stats_out) *stats_out = stats;
  return LUMINAV_STATUS_OK;
}

}  // namespace luminav::vulkan
