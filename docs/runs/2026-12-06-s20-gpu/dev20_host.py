"""session 20: the host time of LuminaV's opt.step() in the Llama 98M loop, piece by piece (GPU kept busy)."""
import sys, time, statistics, torch
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev20_loop import warm_loop
for kind in sys.argv[1:]:
    opt, loop = warm_loop(kind)
    plan = opt._plans[0]
    res = {"step": [], "native_step": [], "get_stream": [], "zero_grad_fb": []}
    for i in range(30):
        opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        torch.cuda.synchronize()
        torch.cuda._sleep(int(0.02 * 1.98e9))
        t0 = time.perf_counter()
        if i % 2 == 0:
            opt.step()
            res["step"].append((time.perf_counter() - t0) * 1e6)
        else:
            s = torch._C._cuda_getCurrentRawStream(0)
            t1 = time.perf_counter()
            plan.native.step(s, 0, 0, opt.skip_nonfinite)
            t2 = time.perf_counter()
            res["get_stream"].append((t1 - t0) * 1e6)
            res["native_step"].append((t2 - t1) * 1e6)
        torch.cuda.synchronize()
    # the same gradients again (nothing new to read): native step alone
    same = []
    for i in range(10):
        torch.cuda._sleep(int(0.02 * 1.98e9))
        t1 = time.perf_counter()
        plan.native.step(torch._C._cuda_getCurrentRawStream(0), 0, 0, opt.skip_nonfinite)
        same.append((time.perf_counter() - t1) * 1e6)
        torch.cuda.synchronize()
    res["native_step_same_grads"] = same
    print(kind, {k: round(statistics.median(v), 1) for k, v in res.items() if v}, flush=True)
    del opt, loop
    torch.cuda.empty_cache()
