"""The TD-CLM tensor form's step at 2^28 (16384 x 16384 fp32) per kernel, under torch.profiler: the nvcc
kernels, the Triton JIT and the Triton AOT kernels (bench/triton_step_bench.py's optimizers), 10 steps each
after 3 warm-up steps; CUDA time per kernel per step."""
import os
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
from triton_step_bench import optimizer  # noqa: E402

for kind in ("luminav_nvcc", "luminav_triton", "luminav_triton_aot"):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn((1 << 14, 1 << 14), device="cuda"))
    p.grad = 0.01 * torch.randn_like(p)
    opt = optimizer(kind, p, "tdclm", "tensor")
    for _ in range(3):
        opt.step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            opt.step()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] += e.device_time_total / 10
    total = sum(per.values())
    print(f"{kind}: {total:.1f} us of kernels a step")
    for name, us in sorted(per.items(), key=lambda x: -x[1])[:8]:
        print(f"  {us:9.1f} us  {name[:90]}")
    del opt, p
    torch.cuda.empty_cache()
