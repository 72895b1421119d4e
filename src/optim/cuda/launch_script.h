// A step's kernel launches and host copies, recorded before any is issued,
// so that the step can be compared with the last one and replayed as a
// CUDA graph (Note [cached step graph] in step_graph_cache.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "optim/cuda/driver_api.h"

namespace luminav::cuda {

class LaunchScript {
 public:
  // One launch of `function` over `blocks` blocks of kBlockSize threads
  // with one by-value parameter of `bytes` bytes (copied here), followed by
  // `trailing_scratch_ptrs` null pointers (Triton's ABI, triton_abi.h).
  void add_kernel(drv::CUfunction function, uint32_t blocks, const void* params, size_t bytes,
                  int trailing_scratch_ptrs);
  // A device-to-host copy issued after every kernel (the status word).
  void add_copy_to_host(void* host, const void* device, size_t bytes);

  size_t kernels() const { return launches_.size(); }
  // The same kernels in the same order over the same grids: a graph of one
  // replays the other once the nodes' arguments are updated.
  bool same_topology(const LaunchScript& other) const;
  // Launch i's by-value parameter equals `other`'s (same topology assumed).
  bool same_arguments(const LaunchScript& other, size_t i) const;
  bool operator==(const LaunchScript& other) const;

  // Launch i as the driver takes it (the pointer array lives in `storage`).
  drv::KernelNodeParams node(size_t i, std::vector<void*>* storage) const;
  // Every kernel then every copy on `stream`; false with `why` set.
  bool launch(drv::CUstream stream, std::string* why) const;
  bool copy_to_host(drv::CUstream stream, std::string* why) const;

 private:
  struct Launch {
    drv::CUfunction function;
    uint32_t blocks;
    int trailing_scratch_ptrs;
    size_t offset, bytes;  // the parameter's bytes in arguments_
  };
  struct HostCopy {
    void* host;
    const void* device;
    size_t bytes;
  };
  std::vector<Launch> launches_;
  std::vector<unsigned char> arguments_;
  std::vector<HostCopy> copies_;
};

// Where a launch goes: straight to the stream, or into a script.
struct LaunchTarget {
  LaunchTarget(drv::CUstream s, LaunchScript* into = nullptr) : stream(s), script(into) {}  // NOLINT: implicit
  drv::CUstream stream;
  LaunchScript* script;
};

// One launch now (the one place a LuminaV kernel is launched); false with `why` set.
bool launch_kernel(drv::CUfunction function, uint32_t blocks, const void* params, int trailing_scratch_ptrs,
                   drv::CUstream stream, std::string* why);

}  // namespace luminav::cuda
