# One process of ab.sh: the F1 loop (1,000 parameters of 4 floats, a new gradient for every
# parameter before every step, as after zero_grad(set_to_none=True)), each opt.step() timed by
# the calling thread's CPU clock (time.thread_time: what the step costs, not the time other
# processes hold the core on this shared VM; LuminaV's F1 step runs on the calling thread) and
# by the wall clock; torch's fused AdamW timed the same way in the same process as the anchor.
# argv: steps (after 3 untimed). Prints us per parameter (= ms per step of 1,000 parameters).
import os, statistics, sys, time
import torch
from luminamoon.optim import LuminaV

torch.set_num_threads(2)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
out = []
for kind in ("luminav", "fused"):
    ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
    opt = LuminaV(ps, lr=1e-3) if kind == "luminav" else torch.optim.AdamW(ps, lr=1e-3, fused=True)
    wall, cpu = [], []
    for i in range(steps + 3):
        opt.zero_grad(set_to_none=True)
        for p in ps:
            p.grad = torch.full_like(p, 0.01)
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.step()
        wall.append((time.perf_counter() - t0) * 1e3); cpu.append((time.thread_time() - c0) * 1e3)
    out.append(f"f1_{kind} wall {statistics.median(wall[3:]):.3f} cpu {statistics.median(cpu[3:]):.3f}")
print(" | ".join(out) + f" | load {os.getloadavg()[0]:.1f}")
