# per-parameter cost of the CPU step: 1,000 tensors of 4 floats, grads reallocated every step
# (the F1 loop of bench/optim_training_loop.py); argv: reps, kinds (luminav, fused)
import statistics, sys, time, torch
from luminamoon.optim import LuminaV
torch.set_num_threads(2)
count = 1000; reps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
out = []
for kind in (sys.argv[2:] or ["luminav"]):
    ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(count)]
    opt = LuminaV(ps, lr=1e-3) if kind == "luminav" else torch.optim.AdamW(ps, lr=1e-3, fused=True)
    t = []
    for i in range(reps + 3):
        for p in ps:
            p.grad = torch.full_like(p, 0.01)
        t0 = time.perf_counter(); opt.step(); t.append((time.perf_counter() - t0) * 1e6 / count)
    out.append(f"{kind} {statistics.median(t[3:]):.3f}")
print(" ".join(out))
