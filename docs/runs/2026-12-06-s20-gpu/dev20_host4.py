"""session 20: the host trace (LUMINAV_TRACE_HOST) of a cold and a warm native step in the Llama 98M loop."""
import sys, os, statistics, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev20_loop import warm_loop
kind = sys.argv[1]
opt, loop = warm_loop(kind)
plan = opt._plans[0]
s = torch._C._cuda_getCurrentRawStream(0)
cold, warm = {}, {}
for i in range(12):
    torch.cuda.synchronize()
    opt.zero_grad(set_to_none=True)
    loop.forward_backward()
    print("--- cold", file=sys.stderr, flush=True)
    opt.step()
    for k, v in plan.native.last_trace: cold.setdefault(k, []).append(v)
    print("--- warm", file=sys.stderr, flush=True)
    plan.native.step(s, 0, 0, opt.skip_nonfinite)
    for k, v in plan.native.last_trace: warm.setdefault(k, []).append(v)
torch.cuda.synchronize()
med = lambda d: {k: round(statistics.median(v), 1) for k, v in d.items()}
print(kind, "cold (after backward):", med(cold), file=sys.stderr, flush=True)
print(kind, "warm (second call):   ", med(warm), file=sys.stderr, flush=True)
