// The Vulkan backend's benchmark, one run: for CLM and TD-CLM (factored) at
// each N, the whole step on device-local buffers and on imported host arrays
// (the backend's own path through the C API), the simd backend on the same
// host arrays, and two copies of N fp32 elements measured in the same run as
// bandwidth anchors: vkCmdCopyBuffer and a compute-shader copy (lv_copy.comp).
// Wall-clock medians of --reps steps after one warm-up, each submission
// waited for; one JSON object per line on stdout. CLM also runs as the
// asynchronous step (vulkan_async.h): --reps steps enqueued back to back on
// the same arrays, then one synchronize; its seconds are the whole time over
// the steps, and the enqueue call's own median is reported beside them; then
// again with the step counter on the device (--no-counter leaves that out: on
// lavapipe one step of 2^28 elements takes minutes).
//
//   luminav_vulkan_bench --log2n 24,26,28 --reps 5 [--no-simd] [--no-host] [--no-counter]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "luminav/luminav.h"
#include "optim/core/factor_update.h"
#include "optim/core/reduction_rounds.h"
#include "optim/core/second_moment_layout.h"
#include "optim/core/step_constants.h"
#include "optim/vulkan/vulkan_async.h"
#include "optim/vulkan/vulkan_context.h"
#include "optim/vulkan/vulkan_passes.h"

namespace vk = luminav::vulkan;
namespace core = luminav::core;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "luminav_vulkan_bench: %s\n", what.c_str());
  std::exit(1);
}

// `warmed`: the caller has just run fn once (e.g. to check that it works).
double median_seconds(int reps, const std::function<void()>& fn, bool warmed = false) {
  if (!warmed) fn();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Device-local buffers and one-off command buffers.
class Device {
 public:
  explicit Device(vk::Context& c) : c_(c), api_(c.api()) {}
  ~Device() {
    if (copy_pool_) api_.vkDestroyDescriptorPool(c_.device(), copy_pool_, nullptr);
    for (auto& [b, m] : owned_) {
      api_.vkDestroyBuffer(c_.device(), b, nullptr);
      api_.vkFreeMemory(c_.device(), m, nullptr);
    }
  }
  VkBuffer buffer(VkDeviceSize bytes) {
    VkBufferCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkBuffer b;
    if (api_.vkCreateBuffer(c_.device(), &info, nullptr, &b) != VK_SUCCESS) die("vkCreateBuffer");
    VkMemoryRequirements req;
    api_.vkGetBufferMemoryRequirements(c_.device(), b, &req);
    const int type = c_.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkMemoryAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = static_cast<uint32_t>(type);
    VkDeviceMemory m;
    if (type < 0 || api_.vkAllocateMemory(c_.device(), &alloc, nullptr, &m) != VK_SUCCESS) {
      die("device-local allocation of " + std::to_string(bytes) + " bytes");
    }
    api_.vkBindBufferMemory(c_.device(), b, m, 0);
    owned_.push_back({b, m});
    return b;
  }
  void run(const std::function<void(VkCommandBuffer)>& record) {
    VkCommandBufferAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    alloc.commandPool = c_.command_pool();
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cmd;
    api_.vkAllocateCommandBuffers(c_.device(), &alloc, &cmd);
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    api_.vkBeginCommandBuffer(cmd, &begin);
    record(cmd);
    api_.vkEndCommandBuffer(cmd);
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    VkFence fence;
    api_.vkCreateFence(c_.device(), &fi, nullptr, &fence);
    VkSubmitInfo submit{};
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    if (api_.vkQueueSubmit(c_.queue(), 1, &submit, fence) != VK_SUCCESS) die("vkQueueSubmit");
    api_.vkWaitForFences(c_.device(), 1, &fence, VK_TRUE, UINT64_MAX);
    api_.vkDestroyFence(c_.device(), fence, nullptr);
    api_.vkFreeCommandBuffers(c_.device(), c_.command_pool(), 1, &cmd);
  }
  const vk::Api& api() const { return api_; }

  // The shader copy of n fp32 elements src -> dst (shaders/lv_copy.comp):
  // its descriptor set is made once, each call records and runs a dispatch.
  void shader_copy(VkBuffer src, VkBuffer dst, size_t n) {
    if (!copy_set_) {
      std::string why;
      copy_pipeline_ = c_.pipeline(vk::Shader::kCopy, 0, 0, &why);
      if (!copy_pipeline_) die(why);
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk::kBindingCount};
      VkDescriptorPoolCreateInfo pool{};
      pool.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      pool.maxSets = 1;
      pool.poolSizeCount = 1;
      pool.pPoolSizes = &size;
      if (api_.vkCreateDescriptorPool(c_.device(), &pool, nullptr, &copy_pool_) != VK_SUCCESS) die("descriptor pool");
      // Every binding points at a valid range (the copy reads 2 and writes 3).
      VkDescriptorBufferInfo ranges[vk::kBindingCount];
      for (uint32_t b = 0; b < vk::kBindingCount; ++b) ranges[b] = {b == vk::kBindExpAvg ? dst : src, 0, VK_WHOLE_SIZE};
      if (vk::make_descriptor_set(c_, copy_pool_, ranges, &copy_set_, &why)) die(why);
    }
    const size_t groups = (n + vk::kWorkgroup - 1) / vk::kWorkgroup;
    const uint32_t x = static_cast<uint32_t>(std::min<size_t>(groups, vk::kMaxGroups));
    const uint32_t y = static_cast<uint32_t>((groups + x - 1) / x);
    vk::ChunkPush push{};
    push.n = static_cast<uint32_t>(n);
    run([&](VkCommandBuffer cmd) {
      api_.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, copy_pipeline_);
      api_.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c_.pipeline_layout(), 0, 1, &copy_set_, 0,
                                   nullptr);
      api_.vkCmdPushConstants(cmd, c_.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
      api_.vkCmdDispatch(cmd, x, y, 1);
    });
  }

 private:
  VkPipeline copy_pipeline_ = VK_NULL_HANDLE;
  VkDescriptorPool copy_pool_ = VK_NULL_HANDLE;
  VkDescriptorSet copy_set_ = VK_NULL_HANDLE;
  vk::Context& c_;
  const vk::Api& api_;
  std::vector<std::pair<VkBuffer, VkDeviceMemory>> owned_;
};

luminav_hyperparams hyper(int mode) {
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.buffer_mode = mode;
  hp.step = 3;
  return hp;
}

double seconds_since(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// One tensor of device-local arrays as the backend's job (vulkan_backend.cc: job_of).
vk::TensorJob device_job(const core::StepConstants& k, const core::MomentLayout& layout, const luminav_tensor& shape,
                         VkBuffer p, VkBuffer g, VkBuffer m, VkBuffer v, const core::TensorGlobals& globals) {
  vk::TensorJob job;
  job.num_elements = shape.num_elements;
  job.layout = layout;
  job.param.buffer = p;
  job.grad.buffer = g;
  job.exp_avg.buffer = m;
  if (layout.kind == core::SecondMoment::kElementwise) job.exp_avg_sq.buffer = v;
  const core::StepConstants e = core::element_constants(k, layout);
  vk::StepParams& q = job.params;
  q.step = e.step;
  q.lr = e.lr, q.beta1 = e.beta1, q.one_minus_beta1 = e.one_minus_beta1, q.beta2 = e.beta2;
  q.one_minus_beta2 = e.one_minus_beta2, q.eps = e.eps, q.decay_factor = e.decay_factor;
  q.inv_bias_correction1 = e.inv_bias_correction1, q.inv_bias_correction2 = e.inv_bias_correction2;
  q.lam = e.lam, q.one_minus_lam = e.one_minus_lam, q.tau = e.tau, q.bound_ratio = e.bound_ratio;
  q.inv_grad_scale = e.inv_grad_scale, q.second_moment = globals.second_moment;
  q.cautious_scale = globals.cautious_scale, q.bound_scale = globals.bound_scale;
  q.kind = static_cast<uint32_t>(layout.kind);
  q.cols = static_cast<uint32_t>(core::has_row_factor(layout) ? layout.cols : 1);
  job.row_sq = globals.row_sq_sums;
  job.col_sq = globals.col_sq_sums;
  return job;
}

// `count` asynchronous steps on device-local arrays enqueued back to back,
// then one synchronize: the seconds of the whole, and each enqueue call's.
// With `counter`, the step count is read and advanced on the device (Note
// [device step counter]). TD-CLM: its second moment (`factors`, R + C
// floats) is a host array, formed on the device (Note [Vulkan asynchronous step]).
double device_async_steps(vk::Context& c, const luminav_hyperparams& hp, const luminav_tensor& shape, VkBuffer p,
                          VkBuffer g, VkBuffer m, VkBuffer v, int count, std::vector<double>& enqueue_seconds,
                          float* counter = nullptr, float* factors = nullptr) {
  auto tensor_at = [&](uint64_t step) {
    luminav_hyperparams at = hp;
    at.step = step;
    core::StepConstants k = core::make_step_constants(at);
    const core::MomentLayout layout = core::moment_layout(k.tdclm, shape);
    vk::AsyncTensor t;
    t.job = device_job(k, layout, shape, p, g, m, v, core::initial_globals(k, 0.0f));
    t.job.params.want_grad_sums = 1;
    const bool elementwise = layout.kind == core::SecondMoment::kElementwise;
    t.job.params.want_update_sums = core::needs_update_sums(k) && elementwise ? 1 : 0;  // TD-CLM: round 1 asks
    t.check_finite = k.check_finite != 0;
    t.needs_reduce = core::reduction_rounds(k) > 0;
    t.factors = elementwise ? nullptr : factors;
    return t;
  };
  vk::AsyncTensor t = tensor_at(hp.step);
  float* counters[1] = {counter};
  vk::AsyncWords words;
  if (counter) {
    words.counters = counters;
    words.params_at_step = [&](size_t, uint64_t step) { return tensor_at(step).job.params; };
  }
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    const auto a = std::chrono::steady_clock::now();
    if (vk::enqueue_async_step(c, std::span(&t, 1), words, false, nullptr, &why)) die(why);
    enqueue_seconds.push_back(seconds_since(a));
  }
  if (vk::synchronize_async_steps(c, &why)) die(why);
  return seconds_since(start);
}

// The whole step on device-local arrays, as the backend runs it on host
// arrays (vulkan_backend.cc): pass 1, the host's finalize, pass 2; the
// seconds of each pass (submission and wait included) go to `pass_seconds`.
void device_step(vk::Context& c, const luminav_hyperparams& hp, const luminav_tensor& shape, VkBuffer p, VkBuffer g,
                 VkBuffer m, VkBuffer v, std::vector<float>& factors, std::vector<double>& sums,
                 std::vector<double> (&pass_seconds)[2]) {
  core::StepConstants k = core::make_step_constants(hp);
  k.grad_sq_wanted = k.tdclm;
  const core::MomentLayout layout = core::moment_layout(k.tdclm, shape);
  core::TensorGlobals gl = core::initial_globals(k, 0.0f);
  if (core::has_row_factor(layout)) {
    gl.row_sq_sums = sums.data();
    gl.col_sq_sums = layout.kind == core::SecondMoment::kFactored ? sums.data() + layout.rows : nullptr;
  }
  auto job_of = [&](const core::TensorGlobals& globals) { return device_job(k, layout, shape, p, g, m, v, globals); };
  std::string why;
  vk::TensorJob reduce = job_of(gl);
  reduce.params.want_grad_sums = 1;
  auto start = std::chrono::steady_clock::now();
  if (vk::run_pass(c, vk::Pass::kReduce, std::span(&reduce, 1), &why)) die(why);
  pass_seconds[0].push_back(seconds_since(start));
  luminav_partials partials = reduce.partials;
  if (core::has_row_factor(layout)) {
    partials.row_count = layout.rows;
    partials.row_factor_sum = core::row_factor_sum(k, layout, factors.data(), gl.row_sq_sums);
  }
  if (!core::finalize_round(k, partials, shape.num_elements, 0, 0.0f, gl).ok()) die("finalize");
  core::UpdatedFactors updated;
  vk::TensorJob apply = job_of(gl);
  if (core::has_row_factor(layout)) {
    core::update_factors(k, layout, factors.data(), gl, updated);
    apply.row_factor = updated.row.data();
    apply.col_over_rho = updated.col_over_rho.data();
  }
  start = std::chrono::steady_clock::now();
  if (vk::run_pass(c, vk::Pass::kApply, std::span(&apply, 1), &why)) die(why);
  pass_seconds[1].push_back(seconds_since(start));
  if (core::has_row_factor(layout)) core::store_factors(layout, updated, factors.data());
}

template <class T>
T* host_array(size_t n, T value) {
  T* a = static_cast<T*>(std::aligned_alloc(4096, (n * sizeof(T) + 4095) / 4096 * 4096));
  if (!a) die("host allocation");
  std::fill(a, a + n, value);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> log2n = {24, 26, 28};
  int reps = 5;
  bool simd = true, host = true, counter_rows = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--log2n" && i + 1 < argc) {
      log2n.clear();
      for (char* s = argv[++i]; *s;) {
        log2n.push_back(static_cast<int>(std::strtol(s, &s, 10)));
        if (*s == ',') ++s;
      }
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--no-simd") {
      simd = false;
    } else if (a == "--no-host") {
      host = false;
    } else if (a == "--no-counter") {
      counter_rows = false;
    } else {
      die("unknown argument " + a);
    }
  }
  std::string why;
  vk::Context* c = vk::Context::get(&why);
  if (!c) die(why);
  std::printf("{\"device\": \"%s\", \"host_import\": %s, \"subgroup_size\": %u, \"max_range\": %llu}\n",
              c->device_name().c_str(), c->host_import() ? "true" : "false", c->subgroup_size(),
              static_cast<unsigned long long>(c->max_range()));
  std::fflush(stdout);
  for (int lg : log2n) {
    const size_t n = size_t{1} << lg;
    const size_t bytes = n * 4;
    Device d(*c);
    VkBuffer p = d.buffer(bytes), g = d.buffer(bytes), m = d.buffer(bytes), v = d.buffer(bytes);
    d.run([&](VkCommandBuffer cmd) {
      d.api().vkCmdFillBuffer(cmd, p, 0, bytes, 0x3f800000u);  // 1.0f
      d.api().vkCmdFillBuffer(cmd, g, 0, bytes, 0x3c23d70au);  // 0.01f
      d.api().vkCmdFillBuffer(cmd, m, 0, bytes, 0u);
      d.api().vkCmdFillBuffer(cmd, v, 0, bytes, 0u);
    });
    // The anchor: a buffer copy of N fp32 elements (reads and writes 8N bytes).
    const double copy_s = median_seconds(reps, [&] {
      d.run([&](VkCommandBuffer cmd) {
        VkBufferCopy region{0, 0, bytes};
        d.api().vkCmdCopyBuffer(cmd, g, v, 1, &region);
      });
    });
    // The same bytes through the shader cores (lv_copy.comp): on NVIDIA
    // vkCmdCopyBuffer runs on a copy engine far below the memory's bandwidth.
    const double shader_copy_s = median_seconds(reps, [&] { d.shader_copy(g, v, n); });
    d.run([&](VkCommandBuffer cmd) { d.api().vkCmdFillBuffer(cmd, v, 0, bytes, 0u); });
    const double copy_gbs = 2.0 * bytes / copy_s / 1e9;
    const double shader_copy_gbs = 2.0 * bytes / shader_copy_s / 1e9;
    for (int mode : {LUMINAV_MODE_CLM, LUMINAV_MODE_TDCLM}) {
      const luminav_hyperparams hp = hyper(mode);
      luminav_tensor shape{};
      shape.num_elements = n;
      shape.rows = size_t{1} << (lg / 2);
      shape.td_factor = LUMINAV_TD_FACTORED;
      const size_t cols = n / shape.rows;
      // Bytes a step must move: CLM reads g in pass 1, then g, p, m, v and
      // writes p, m, v; TD-CLM factored reads g twice in pass 1 (tiles, row
      // and column sums), then g, p, m and writes p, m.
      const double step_bytes = (mode == LUMINAV_MODE_CLM ? 8.0 : 7.0) * bytes;
      const char* name = mode == LUMINAV_MODE_CLM ? "clm" : "tdclm_factored";
      std::vector<float> factors(shape.rows + cols, 0.0f);
      std::vector<double> sums(shape.rows + cols, 0.0);
      std::vector<double> pass_seconds[2];
      const double dev_s =
          median_seconds(reps, [&] { device_step(*c, hp, shape, p, g, m, v, factors, sums, pass_seconds); });
      auto median = [](std::vector<double> t) {  // the warm-up's time included: one of reps + 1
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
      };
      auto report = [&](const char* memory, double s) {
        std::printf("{\"log2n\": %d, \"mode\": \"%s\", \"memory\": \"%s\", \"seconds\": %.6g, \"elements_per_s\": %.4g, "
                    "\"gb_per_s\": %.4g, \"copy_gb_per_s\": %.4g, \"pct_of_copy\": %.1f, "
                    "\"shader_copy_gb_per_s\": %.4g, \"pct_of_shader_copy\": %.1f}\n",
                    lg, name, memory, s, n / s, step_bytes / s / 1e9, copy_gbs, 100.0 * (step_bytes / s / 1e9) / copy_gbs,
                    shader_copy_gbs, 100.0 * (step_bytes / s / 1e9) / shader_copy_gbs);
        std::fflush(stdout);
      };
      report("vulkan_device_local", dev_s);
      std::printf("{\"log2n\": %d, \"mode\": \"%s\", \"memory\": \"vulkan_device_local\", "
                  "\"pass1_seconds\": %.6g, \"pass2_seconds\": %.6g}\n",
                  lg, name, median(pass_seconds[0]), median(pass_seconds[1]));
      std::fflush(stdout);
      {
        std::vector<double> enqueue_s, warm;
        std::vector<float> async_factors(shape.rows + cols, 0.0f);
        float* f = mode == LUMINAV_MODE_CLM ? nullptr : async_factors.data();
        device_async_steps(*c, hp, shape, p, g, m, v, 1, warm, nullptr, f);  // warm-up
        const double async_s = device_async_steps(*c, hp, shape, p, g, m, v, reps, enqueue_s, nullptr, f) / reps;
        report("vulkan_device_local_async", async_s);
        std::printf("{\"log2n\": %d, \"mode\": \"%s\", \"memory\": \"vulkan_device_local_async\", "
                    "\"steps\": %d, \"enqueue_seconds_median\": %.6g}\n",
                    lg, name, reps, median(enqueue_s));
        std::fflush(stdout);
        // The same with the step count on the device (torch's capturable state["step"]).
        if (counter_rows) {
          float counter = static_cast<float>(hp.step - 1);
          std::vector<double> counter_enqueue_s;
          const double counter_s =
              device_async_steps(*c, hp, shape, p, g, m, v, reps, counter_enqueue_s, &counter, f) / reps;
          report("vulkan_device_local_async_counter", counter_s);
          std::printf("{\"log2n\": %d, \"mode\": \"%s\", \"memory\": \"vulkan_device_local_async_counter\", "
                      "\"steps\": %d, \"enqueue_seconds_median\": %.6g, \"counter_after\": %.1f}\n",
                      lg, name, reps, median(counter_enqueue_s), counter);
          std::fflush(stdout);
        }
      }
      if (!host && !simd) continue;
      float* hp_ = host_array<float>(n, 1.0f);
      float* hg = host_array<float>(n, 0.01f);
      float* hm = host_array<float>(n, 0.0f);
      float* hv = host_array<float>(mode == LUMINAV_MODE_CLM ? n : shape.rows + cols, 0.0f);
      luminav_tensor t = shape;
      t.param = hp_;
      t.grad = hg;
      t.exp_avg = hm;
      t.exp_avg_sq = hv;
      auto host_step = [&](const char* backend) {
        luminav_options o{};
        o.backend = backend;
        return luminav_step(&hp, &t, &o) == LUMINAV_STATUS_OK;
      };
      // A backend this build lacks (the GPU run may build without simd) is a row saying so.
      auto host_case = [&](const char* backend, const char* memory) {
        if (!host_step(backend)) {
          std::printf("{\"log2n\": %d, \"mode\": \"%s\", \"memory\": \"%s\", \"error\": \"%s\"}\n", lg, name, memory,
                      luminav_last_error_message());
          return;
        }
        report(memory, median_seconds(reps, [&] { host_step(backend); }, true));  // the check was the warm-up
      };
      if (host) host_case("vulkan", "vulkan_host_import");
      if (host) {
        // The asynchronous step on the same host arrays through the C API.
        luminav_options o{};
        o.backend = "vulkan";
        luminav_step_status status{};
        luminav_async async{};
        async.status = &status;
        luminav_group group{&hp, &t, 1, nullptr, nullptr, 0};
        auto enqueue = [&] {
          if (luminav_step_groups_enqueue(&group, 1, &o, &async) != LUMINAV_STATUS_OK) die(luminav_last_error_message());
        };
        enqueue();
        if (luminav_synchronize(&o) != LUMINAV_STATUS_OK) die(luminav_last_error_message());
        const auto start = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) enqueue();
        if (luminav_synchronize(&o) != LUMINAV_STATUS_OK) die(luminav_last_error_message());
        report("vulkan_host_import_async", seconds_since(start) / reps);
      }
      if (simd) host_case("simd", "simd_host");
      std::free(hp_), std::free(hg), std::free(hm), std::free(hv);
    }
  }
  return 0;
}
