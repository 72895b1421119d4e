import time, statistics, torch, sys
from luminamoon.optim import LuminaV
torch.manual_seed(0)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
res = {}
for name, kw in [("tdclm", {}), ("tdclm_cautious", dict(cautious=True)), ("clm_cautious", dict(cautious=True, mode="clm"))]:
    p = torch.nn.Parameter(torch.randn(n, n))
    p.grad = torch.randn(n, n)
    kw2 = dict(mode="tdclm"); kw2.update(kw)
    opt = LuminaV([p], lr=1e-3, **kw2)
    for _ in range(2): opt.step()
    ts = []
    for _ in range(7):
        t0 = time.perf_counter(); opt.step(); ts.append(time.perf_counter() - t0)
    res[name] = statistics.median(ts) * 1e3
print(" ".join(f"{k} {v:.1f} ms" for k, v in res.items()), flush=True)
