# One process of ab_cpu.sh: as front.py, but each step also timed by the calling thread's CPU clock
# (time.thread_time: what the step itself costs, not the time other processes hold the core on a
# loaded VM; LuminaV's F1 and after-backward steps run on the calling thread at these sizes). The
# after-backward part without torch's anchor (its OpenMP step takes 2-200 ms under this load).
# argv: F1 steps, after-backward steps.
import os, statistics, sys, time
from pathlib import Path
import torch
from luminamoon.optim import LuminaV
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from optim_host_profile import TinyDeepModel  # noqa: E402

torch.set_num_threads(2)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
cold_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
out = []
for kind in ("luminav", "fused"):
    ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
    opt = LuminaV(ps, lr=1e-3) if kind == "luminav" else torch.optim.AdamW(ps, lr=1e-3, fused=True)
    wall, cpu = [], []
    for i in range(reps + 3):
        for p in ps:
            p.grad = torch.full_like(p, 0.01)
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.step()
        wall.append((time.perf_counter() - t0) * 1e3); cpu.append((time.thread_time() - c0) * 1e3)
    out.append(f"f1_{kind} wall {statistics.median(wall[3:]):.3f} cpu {statistics.median(cpu[3:]):.3f}")
model = TinyDeepModel()
opt = LuminaV(model.parameters(), lr=6e-4, weight_decay=0.1)
for _ in range(3):
    opt.zero_grad(set_to_none=True); model.loss().backward(); opt.step()
t = {w: ([], []) for w in ("cold", "warm")}
for i in range(cold_steps):
    opt.zero_grad(set_to_none=True)
    model.loss().backward()
    for when in ("cold", "warm"):
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.step()
        t[when][0].append((time.perf_counter() - t0) * 1e6); t[when][1].append((time.thread_time() - c0) * 1e6)
for when, (wall, cpu) in t.items():
    out.append(f"{when}_luminav wall {statistics.median(wall):.1f} cpu {statistics.median(cpu):.1f}")
print(" | ".join(out) + f" | load {os.getloadavg()[0]:.1f}")
