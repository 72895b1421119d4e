"""session 20: the host trace (LUMINAV_TRACE_HOST) of a cold and a warm native step in the Llama 98M loop."""
import sys, os, time, statistics, torch
sys.path.insert(0, "bench")
from optim_training_loop import make_optimizer, Loop, llama
cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
kind = sys.argv[1]
model = llama("cuda", **cfg)
opt = make_optimizer(kind, model)
loop = Loop(model, opt, 16, cfg["seq"], cfg["vocab"], "cuda")
for _ in range(4):
    loop.step()
torch.cuda.synchronize()
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
