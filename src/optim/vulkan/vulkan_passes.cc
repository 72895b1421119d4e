// Chunks, memory (import, staging or device buffers), descriptor sets, one
// command buffer per batch of tensors, and the host's fixed-order sums.
#include "optim/vulkan/vulkan_passes.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "optim/vulkan/vulkan_async.h"
#include "optim/vulkan/vulkan_batch.h"
#include "optim/vulkan/vulkan_tile_order.h"

namespace luminav::vulkan {
namespace {

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

// One chunk of a job: elements [first, first + count), rows [row0, row0 + rows).
struct Chunk {
  size_t job, first, count, row0, rows;
  // Arena offsets (bytes): blocks_at is device-only scratch (the chunk's
  // column sums per row block), totals_at the job's column totals.
  size_t partials_at = 0, rows_at = 0, blocks_at = 0, totals_at = 0, factor_at = 0;
};

}  // namespace

int record_factor_sums(Context& context, Batch& batch, const TensorJob& job, const Bound (&bindings)[kBindingCount],
                       const ChunkPush& push, const Bound& rows, const Bound* blocks, const Bound* totals,
                       std::string* why) {
  // lv_factor_sums.comp: y = 0 the rows, y = 1 the (row block, column)
  // pairs; then lv_column_totals.comp adds the blocks onto the totals.
  Bound b[kBindingCount];
  std::copy(bindings, bindings + kBindingCount, b);
  const bool factored = blocks != nullptr;
  b[kBindOut] = rows;
  if (factored) b[kBindOut2] = *blocks;
  const size_t chunk_rows = push.rows;
  const size_t block_count = factored ? div_up(chunk_rows, kRowBlock) : 0;
  const bool wide = job.layout.cols >= 256;
  const size_t row_groups = wide ? chunk_rows : div_up(chunk_rows, kWorkgroup);
  const size_t pair_groups = div_up(block_count * job.layout.cols, kWorkgroup);
  const uint32_t x = static_cast<uint32_t>(std::min<size_t>(std::max(row_groups, pair_groups), kMaxGroups));
  VkPipeline sums = context.pipeline(Shader::kFactorSums, 0, job.grad_dtype, why);
  int code = sums ? batch.dispatch(sums, b, push, x, factored ? 2u : 1u, why) : LUMINAV_STATUS_DRIVER_ERROR;
  if (!code && factored) {
    b[kBindOut] = *totals;
    batch.shader_barrier();  // the blocks, and the totals of the chunk before
    const uint32_t cx = static_cast<uint32_t>(std::min<size_t>(div_up(job.layout.cols, kWorkgroup), kMaxGroups));
    VkPipeline add = context.pipeline(Shader::kColumnTotals, 0, 0, why);
    code = add ? batch.dispatch(add, b, push, cx, 1, why) : LUMINAV_STATUS_DRIVER_ERROR;
  }
  return code;
}

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
  // The asynchronous steps before this pass are done first: they may write
  // what it reads, and their results go back to the host (staging).
  if (int code = complete_async_steps(context, true, why); code) return code;
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
      VkPipeline pipeline = context.pipeline(Shader::kApply, pd, gd, why, shader_features(job.params));
      code = pipeline ? batch.dispatch(pipeline, b, push, x, y, why) : LUMINAV_STATUS_DRIVER_ERROR;
    } else {
      Bound partials = arena_bound(c.partials_at, div_up(c.count, kTileElements) * sizeof(TilePartial));
      b[kBindOut] = partials;
      download.push_back({c.partials_at, c.partials_at, div_up(c.count, kTileElements) * sizeof(TilePartial)});
      VkPipeline pipeline = context.pipeline(Shader::kReduce, pd, gd, why, shader_features(job.params));
      code = pipeline ? batch.dispatch(pipeline, b, push, static_cast<uint32_t>(div_up(c.count, kTileElements)), 1, why)
                      : LUMINAV_STATUS_DRIVER_ERROR;
      if (!code && rows && job.params.want_grad_sums) {
        download.push_back({c.rows_at, c.rows_at, c.rows * sizeof(double)});
        const Bound blocks = arena_bound(c.blocks_at, div_up(c.rows, kRowBlock) * job.layout.cols * sizeof(double));
        const Bound totals = arena_bound(c.totals_at, job.layout.cols * sizeof(double));
        code = record_factor_sums(context, batch, job, b, push, arena_bound(c.rows_at, c.rows * sizeof(double)),
                                  factored ? &blocks : nullptr, factored ? &totals : nullptr, why);
      }
    }
    if (code) return code;
  }
  for (const VkBufferCopy& t : totals) download.push_back(t);
  batch.copy(area.device, area.host, download, false);
  if (int code = batch.submit_and_wait(why); code) return code;

  if (pass == Pass::kReduce) {
    // The host's part of Note [fixed combination order]: the tiles in the
    // order of Note [tile combination order] (the asynchronous step's too).
    std::vector<TileCombiner> sums(jobs.size());
    for (const Chunk& c : chunks) {
      TensorJob& job = jobs[c.job];
      const auto* tiles = reinterpret_cast<const TilePartial*>(base + c.partials_at);
      for (size_t t = 0; t < div_up(c.count, kTileElements); ++t) sums[c.job].add(tiles[t]);
      if (core::has_row_factor(job.layout) && job.params.want_grad_sums) {
        std::memcpy(job.row_sq + c.row0, base + c.rows_at, c.rows * sizeof(double));
        if (job.layout.kind == core::SecondMoment::kFactored && c.first == 0) {
          std::memcpy(job.col_sq, base + c.totals_at, job.layout.cols * sizeof(double));
        }
      }
    }
    for (size_t j = 0; j < jobs.size(); ++j) jobs[j].partials = sums[j].sums();
  }
  if (stats_out) *stats_out = stats;
  return LUMINAV_STATUS_OK;
}

}  // namespace luminav::vulkan
