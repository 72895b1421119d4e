import os, sys, time, statistics, torch
from luminamoon.optim import LuminaV
torch.manual_seed(0)
params = [torch.nn.Parameter(torch.randn(64, 64)) for _ in range(111)]
opt = LuminaV(params, lr=1e-3)
def new_grads():
    for p in params: p.grad = torch.randn_like(p)
new_grads(); opt.step(); opt.step()
plan = opt._plans[0]
junk = bytearray(64 << 20)
cold, warm = {}, {}
for i in range(15):
    new_grads()
    for j in range(0, len(junk), 64): junk[j] = i & 255   # evict the caches, as a backward would
    opt.step()
    for k, v in plan.native.last_trace: cold.setdefault(k, []).append(v)
    opt.step()
    for k, v in plan.native.last_trace: warm.setdefault(k, []).append(v)
med = lambda d: {k: round(statistics.median(v), 1) for k, v in d.items()}
print("cold", med(cold)); print("warm", med(warm))
