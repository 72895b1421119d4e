# One process of the A/B (ab.sh): the F1 loop (1,000 tensors of 4 floats, new gradients every step,
# us per parameter) and the step right after a backward pass of a model of 111 tiny tensors (TinyDeepModel)
# ("cold": autograd's new gradients; "warm": the same step again at once), each with torch's fused
# AdamW in the same process. argv: F1 steps, after-backward steps.
import os, statistics, sys, time
from pathlib import Path
import torch
from luminamoon.optim import LuminaV
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from optim_host_profile import TinyDeepModel  # noqa: E402

torch.set_num_threads(2)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
cold_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
out = []
for kind in ("luminav", "fused"):
    ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
    opt = LuminaV(ps, lr=1e-3) if kind == "luminav" else torch.optim.AdamW(ps, lr=1e-3, fused=True)
    t = []
    for i in range(reps + 3):
        for p in ps:
            p.grad = torch.full_like(p, 0.01)
        t0 = time.perf_counter(); opt.step(); t.append((time.perf_counter() - t0) * 1e6 / 1000)
    out.append(f"f1_{kind} {statistics.median(t[3:]):.3f}")
loops = {}
for kind in ("luminav", "fused"):
    model = TinyDeepModel()
    opt = (LuminaV(model.parameters(), lr=6e-4, weight_decay=0.1) if kind == "luminav"
           else torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True))
    loops[kind] = (model, opt)
    for _ in range(3):
        opt.zero_grad(set_to_none=True); model.loss().backward(); opt.step()
times = {(k, w): [] for k in loops for w in ("cold", "warm")}
for i in range(cold_steps):
    for kind, (model, opt) in (loops.items() if i % 2 == 0 else reversed(loops.items())):
        opt.zero_grad(set_to_none=True)
        model.loss().backward()
        for when in ("cold", "warm"):
            t0 = time.perf_counter(); opt.step(); times[(kind, when)].append((time.perf_counter() - t0) * 1e6)
for (kind, when), v in times.items():
    out.append(f"{when}_{kind} {statistics.median(v):.1f}")
print(" ".join(out) + f" load {os.getloadavg()[0]:.1f}")
