# fastslow.py STEPS (LUMINAV_TRACE_HOST=1, after build): the F1 loop with the plan reading tensors through DLPack (fast) and through torch's methods (slow, tensor_type=None), alternated in one process
import statistics, sys, time, types, torch
import luminamoon.optim.torch_optimizer as tom
from luminamoon.optim import LuminaV
torch.set_num_threads(2)
real = tom._native
class SlowPlan(real.StepPlan):
    def __init__(self, backend, device_type, index, *types_):
        super().__init__(backend, device_type, index, None, None)
slow_native = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
slow_native.StepPlan = SlowPlan
opts = {}
for kind in ("fast", "slow"):
    ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(1000)]
    tom._native = slow_native if kind == "slow" else real
    opts[kind] = (ps, LuminaV(ps, lr=1e-3))
    for p in ps: p.grad = torch.full_like(p, 0.01)
    opts[kind][1].step()
    assert opts[kind][1]._plans[0].native.reads_through_dlpack == (kind == "fast")
res = {k: ([], [], []) for k in opts}
for i in range(int(sys.argv[1])):
    for kind, (ps, opt) in (opts.items() if i % 2 == 0 else reversed(list(opts.items()))):
        tom._native = slow_native if kind == "slow" else real
        for p in ps: p.grad = torch.full_like(p, 0.01)
        c0 = time.thread_time(); opt.step(); c = (time.thread_time() - c0) * 1e3
        tr = dict(opt._plans[0].native.last_trace)
        res[kind][0].append(c); res[kind][1].append(tr["plan refresh"] / 1000); res[kind][2].append(tr["native call"] / 1000)
for kind, (c, r, n) in res.items():
    print(f"{kind}: opt.step cpu {statistics.median(c):.3f} us/param, refresh {statistics.median(r):.3f}, native {statistics.median(n):.3f} (wall)")
