# opt.step() alone over 1,000 tensors of 4 floats, the gradients swapped between two sets every step
import sys, time, torch
from luminamoon.optim import LuminaV
torch.set_num_threads(2)
ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
sets = [[torch.full_like(p, 0.01) for p in ps] for _ in range(2)]
opt = LuminaV(ps, lr=1e-3)
steps = int(sys.argv[1])
opt.step()
print("ready", flush=True)
t0 = time.perf_counter()
for i in range(steps):
    for p, g in zip(ps, sets[i % 2]):
        p.grad = g
    opt.step()
print((time.perf_counter() - t0) * 1e6 / steps / 1000, "us/param incl. grad swap", flush=True)
