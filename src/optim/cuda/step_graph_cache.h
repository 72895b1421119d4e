// Note [cached step graph]: an asynchronous step is a dozen launches
// (prepare, a reduction per batch and round, an apply per batch, commit),
// each a driver call of a 4 KiB parameter block; in a training loop, where
// the optimizer runs right after a backward pass has left the CPU's caches
// cold, those calls cost ~180 us of host time, and in eager mode the GPU
// waits for them. A training loop repeats the same step: the same kernels
// over the same grids, and mostly the same pointers (torch's caching
// allocator hands a gradient the same block each step). So the step is
// recorded first (LaunchScript), and the cache
// - launches it eagerly the first time its topology (kernels and grids) is
//   seen;
// - builds a CUDA graph of it (a chain of kernel nodes) the second time;
// - from then on updates only the nodes whose arguments changed (a host
//   learning rate in the prepare node, a reallocated gradient) and launches
//   the graph: one driver call.
// The nodes' arguments are the launches' own bytes, so a replay runs the
// kernels the eager path would, with the same arguments: the results are
// bit-identical. A stream that is being captured (torch.cuda.graph) gets
// the eager launches, which the capture records. LUMINAV_CUDA_GRAPHS=0
// turns the cache off (every step eager), as does a driver without the
// graph entry points. On the H200 (docs/benchmarks.md, "Issue 13 (session
// 3)") it took the host time of opt.step() in the Llama 98M loop from 0.60
// to 0.44 of torch fused AdamW's, bit-identical to the eager launches
// (tests/optim/test_gpu_step_graph.py).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "optim/cuda/driver_api.h"
#include "optim/cuda/launch_script.h"

namespace luminav::cuda {

class StepGraphCache {
 public:
  StepGraphCache() = default;
  StepGraphCache(const StepGraphCache&) = delete;
  StepGraphCache& operator=(const StepGraphCache&) = delete;
  // The graphs are not destroyed: the cache lives in its context's state
  // until the process exits, when the driver may already be torn down
  // (the context's other device buffers are kept the same way).
  ~StepGraphCache() = default;

  // True when `script` equals one submitted before (its pointers were
  // checked then, so the caller may skip checking them again).
  bool submitted_before(const LaunchScript& script);

  // Issues `script`'s kernels on `stream` (a graph replay or eagerly, as the
  // note says), then its host copies; false with `why` set.
  bool submit(const LaunchScript& script, drv::CUstream stream, std::string* why);

  struct Counters {
    uint64_t eager = 0, built = 0, replayed = 0, nodes_updated = 0;
  };
  Counters counters();

  static constexpr size_t kMaxEntries = 4;  // optimizers (or step shapes) per context kept

 private:
  struct Entry {
    LaunchScript last;  // the script last submitted with this topology
    drv::CUgraph graph = nullptr;
    drv::CUgraphExec exec = nullptr;
    std::vector<drv::CUgraphNode> nodes;  // launch i is nodes[i]
    bool build_failed = false;
    uint64_t last_used = 0;
  };
  static bool graphs_enabled(drv::CUstream stream);
  bool build(Entry& e, std::string* why);
  bool replay(Entry& e, const LaunchScript& script, drv::CUstream stream, std::string* why);
  Entry& entry_for(const LaunchScript& script, bool* is_new);
  static void release(Entry& e);

  std::mutex mutex_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  Counters counters_;
};

}  // namespace luminav::cuda
