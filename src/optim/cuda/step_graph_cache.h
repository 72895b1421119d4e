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
//
// Note [a step seen before]: recording a step writes a dozen 4 KiB parameter
// blocks and compares them with the last step's, and in a training loop it
// runs cold, right after a backward pass: 130-143 us of the ~420 us that
// opt.step() took on the host of the H100 machine before its first kernel
// started, against 7 us warm (the Llama 98M loop, issue 13, session 15). The
// step's launches are a function of its inputs (step_inputs.h: ~90 bytes a
// tensor), and a loop whose gradients come back at the same addresses gives
// the same inputs every step (the step number and a device lr live on the
// device). So a graph replayed for a step keeps that step's inputs; a call
// whose inputs equal them, on a stream not being captured, launches the
// graph again with its host copies and records nothing. Any other call is
// recorded and submitted as before. LUMINAV_CUDA_STEP_AGAIN=0 records every
// step (the A/B). In that loop (zero_grad(set_to_none=True): the caching
// allocator gave the gradients their addresses back) 76 of 78 replays were
// launched again; opt.step() after a backward pass took 308 us instead of
// 413-424, and its host time with the GPU busy 0.28-0.31 ms against 0.57-0.64
// recorded in the same runs (docs/benchmarks.md, row L1-3d).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
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
  // note says), then its host copies; false with `why` set. `inputs`: what
  // the script was recorded from (Note [a step seen before]).
  bool submit(const LaunchScript& script, std::span<const unsigned char> inputs, drv::CUstream stream,
              std::string* why);
  // Note [a step seen before]: launches the graph whose step had `inputs`,
  // with its host copies, setting *launched; leaves it false where no graph
  // fits or `stream` is being captured. False with `why` set on a failure.
  bool submit_again(std::span<const unsigned char> inputs, drv::CUstream stream, bool* launched, std::string* why);

  struct Counters {
    uint64_t eager = 0, built = 0, replayed = 0, nodes_updated = 0;
    uint64_t unchanged = 0;  // replays of a step seen before, not recorded (Note [a step seen before])
  };
  Counters counters();

  static constexpr size_t kMaxEntries = 4;  // optimizers (or step shapes) per context kept

 private:
  struct Entry {
    LaunchScript last;  // the script last submitted with this topology
    std::vector<unsigned char> inputs;  // what `last` was recorded from, while the graph replays it
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
