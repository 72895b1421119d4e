# The F1 step's host stages (LUMINAV_TRACE_HOST=1: plan refresh, native call and the library's
# stages inside it, wall us) and the step's thread CPU, medians of N steps, us per parameter.
# Run as: LUMINAV_TRACE_HOST=1 python split.py N 2>/dev/null
import os, statistics, sys, time
import torch
from luminamoon.optim import LuminaV

torch.set_num_threads(2)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
opt = LuminaV(ps, lr=1e-3)
stages, cpu = {}, []
for i in range(steps + 3):
    opt.zero_grad(set_to_none=True)
    for p in ps:
        p.grad = torch.full_like(p, 0.01)
    c0 = time.thread_time()
    opt.step()
    c1 = time.thread_time()
    if i >= 3:
        cpu.append((c1 - c0) * 1e3)
        for name, us in opt._plans[0].native.last_trace:
            stages.setdefault(name, []).append(us / 1000)
print(f"step thread CPU {statistics.median(cpu):.3f} | "
      + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in stages.items())
      + f" | backend {__import__('luminamoon')._native.last_backend() if hasattr(__import__('luminamoon')._native, 'last_backend') else '?'}"
      + f" | load {os.getloadavg()[0]:.1f}")
