#include "optim/cuda/launch_script.h"

#include <cstring>

#include "optim/cuda/cuda_driver.h"
#include "optim/cuda/launch_params.h"
#include "optim/cuda/triton_abi.h"

namespace luminav::cuda {

void LaunchScript::add_kernel(drv::CUfunction function, uint32_t blocks, const void* params, size_t bytes,
                              int trailing_scratch_ptrs) {
  const size_t offset = arguments_.size();
  arguments_.resize(offset + bytes);
  std::memcpy(arguments_.data() + offset, params, bytes);
  launches_.push_back({function, blocks, trailing_scratch_ptrs, offset, bytes});
}

void LaunchScript::add_copy_to_host(void* host, const void* device, size_t bytes) {
  copies_.push_back({host, device, bytes});
}

bool LaunchScript::same_topology(const LaunchScript& other) const {
  if (launches_.size() != other.launches_.size()) return false;
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& a = launches_[i];
    const Launch& b = other.launches_[i];
    if (a.function != b.function || a.blocks != b.blocks || a.bytes != b.bytes ||
        a.trailing_scratch_ptrs != b.trailing_scratch_ptrs) {
      return false;
    }
  }
  return true;
}

bool LaunchScript::same_arguments(const LaunchScript& other, size_t i) const {
  const Launch& a = launches_[i];
  const Launch& b = other.launches_[i];
  return a.bytes == b.bytes &&
         std::memcmp(arguments_.data() + a.offset, other.arguments_.data() + b.offset, a.bytes) == 0;
}

bool LaunchScript::operator==(const LaunchScript& other) const {
  if (!same_topology(other) || arguments_ != other.arguments_ || copies_.size() != other.copies_.size()) return false;
  for (size_t i = 0; i < copies_.size(); ++i) {
    const HostCopy& a = copies_[i];
    const HostCopy& b = other.copies_[i];
    if (a.host != b.host || a.device != b.device || a.bytes != b.bytes) return false;
  }
  return true;
}

drv::KernelNodeParams LaunchScript::node(size_t i, std::vector<void*>* storage) const {
  const Launch& l = launches_[i];
  void* user[] = {const_cast<unsigned char*>(arguments_.data() + l.offset)};
  *storage = pack_triton_abi_args(user, l.trailing_scratch_ptrs);
  drv::KernelNodeParams p{};
  p.func = l.function;
  p.grid_x = l.blocks;
  p.grid_y = p.grid_z = 1;
  p.block_x = kBlockSize;
  p.block_y = p.block_z = 1;
  p.params = storage->data();
  return p;
}

bool LaunchScript::launch(drv::CUstream stream, std::string* why) const {
  for (const Launch& l : launches_) {
    if (!launch_kernel(l.function, l.blocks, arguments_.data() + l.offset, l.trailing_scratch_ptrs, stream, why)) {
      return false;
    }
  }
  return true;
}

bool LaunchScript::copy_to_host(drv::CUstream stream, std::string* why) const {
  const CudaDriver& d = CudaDriver::instance();
  for (const HostCopy& c : copies_) {
    const drv::CUresult r =
        d.api().cuMemcpyDtoHAsync(c.host, reinterpret_cast<drv::CUdeviceptr>(c.device), c.bytes, stream);
    if (r != drv::CUDA_SUCCESS) {
      *why = d.error("cuMemcpyDtoHAsync", r);
      return false;
    }
  }
  return true;
}

bool launch_kernel(drv::CUfunction function, uint32_t blocks, const void* params, int trailing_scratch_ptrs,
                   drv::CUstream stream, std::string* why) {
  void* user[] = {const_cast<void*>(params)};
  std::vector<void*> args = pack_triton_abi_args(user, trailing_scratch_ptrs);
  const CudaDriver& d = CudaDriver::instance();
  const drv::CUresult r =
      d.api().cuLaunchKernel(function, blocks, 1, 1, kBlockSize, 1, 1, 0, stream, args.data(), nullptr);
  if (r != drv::CUDA_SUCCESS) {
    *why = d.error("cuLaunchKernel", r);
    return false;
  }
  return true;
}

}  // namespace luminav::cuda
