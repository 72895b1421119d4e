# The F1 step alone for perf (prof.sh attaches after setup): 1,000 parameters of 4 floats whose
# gradients are swapped between two preallocated sets before every step (every pointer moves, so
# the cached plan re-reads and re-validates every gradient as in F1, without torch.full_like's
# allocations in the profile). argv: seconds to run.
import sys, time
import torch
from luminamoon.optim import LuminaV

torch.set_num_threads(2)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
sets = [[torch.full_like(p, 0.01) for p in ps] for _ in range(2)]
opt = LuminaV(ps, lr=1e-3)
print("ready", flush=True)
end = time.time() + seconds
i = 0
while time.time() < end:
    for p, g in zip(ps, sets[i & 1]):
        p.grad = g
    opt.step()
    i += 1
print("steps", i)
