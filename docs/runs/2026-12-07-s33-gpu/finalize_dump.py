"""Why the JIT's finalize_kernel takes 87 us in the TD-CLM tensor step at 2^28 where the AOT cubin of the same
source takes 19 (call 4, torch.profiler): one JIT step, then every compiled finalize_kernel's cubin, TTGIR and
metadata to $OUT; then finalize alone under torch.profiler (kernel time only), JIT at 4 and 8 warps, over the
step's own partials."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
from triton_step_bench import optimizer  # noqa: E402
from luminamoon.optim import triton_kernels as tk  # noqa: E402

out = os.environ["OUT"]
p = torch.nn.Parameter(torch.randn((1 << 14, 1 << 14), device="cuda"))
p.grad = 0.01 * torch.randn_like(p)
opt = optimizer("luminav_triton", p, "tdclm", "tensor")
opt.step()
torch.cuda.synchronize()
caches = getattr(tk.finalize_kernel, "device_caches", None)
for dev, entry in (caches or {}).items():
    table = entry[0] if isinstance(entry, tuple) else entry
    for i, (key, compiled) in enumerate(table.items()):
        print("key", i, str(key)[:1500])
        md = compiled.metadata
        print("  num_warps", md.num_warps, "num_stages", md.num_stages, "shared", md.shared,
              "n_regs", getattr(compiled, "n_regs", None), "n_spills", getattr(compiled, "n_spills", None))
        with open(f"{out}/jit_finalize_{i}.cubin", "wb") as f:
            f.write(compiled.asm["cubin"])
        with open(f"{out}/jit_finalize_{i}.ttgir", "w") as f:
            f.write(compiled.asm["ttgir"])
programs = (1 << 28) // tk.REDUCE_BLOCK
partials = torch.rand(5 * programs, dtype=torch.float64, device="cuda")
partials[:programs] = 0
words = torch.tensor([0, tk.NO_BAD, 0, 0], dtype=torch.int32, device="cuda")
gl, v, k = torch.zeros(4, device="cuda"), torch.full((1,), 0.5, device="cuda"), torch.ones(4, device="cuda")
for warps in (4, 8, 4, 8):
    def launch():
        tk.finalize_kernel[(1,)](partials, programs, gl, words, k, v, v, v, v, 1 << 28, 1, 1 << 28, 1, 0, 0.999, 0.001,
                                 0.0, ROUND_GRAD=True, ROUND_UPDATE=False, CHECK_FINITE=True, KIND=1, CAUTIOUS=False,
                                 BOUND_TENSOR=False, BLOCK=tk.FINALIZE_BLOCK, num_warps=warps, enable_fp_fusion=False)
    launch()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            launch()
        torch.cuda.synchronize()
    ts = [e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"finalize alone, JIT {warps} warps: {sorted(ts)[len(ts) // 2]:.1f} us median of {len(ts)}; s bits "
          f"{gl[0].view(torch.int32).item():#x}")
