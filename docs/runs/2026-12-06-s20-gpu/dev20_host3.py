"""session 20: why the first native step after a pause costs ~300 us and a repeated one ~60 us."""
import sys, os, time, statistics, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev20_loop import warm_loop
kind = sys.argv[1]
opt, loop = warm_loop(kind)
plan = opt._plans[0]
s = torch._C._cuda_getCurrentRawStream(0)
call = lambda: plan.native.step(s, 0, 0, opt.skip_nonfinite)
def timed(fn):
    t = time.perf_counter(); fn(); return (time.perf_counter() - t) * 1e6
res = {k: [] for k in ("a_after_sync", "a_second", "b_after_spin", "c_after_sleep_only", "d_loop_step_host", "d_loop_second_call", "e_after_empty_graph_query")}
for i in range(15):
    torch.cuda.synchronize(); torch.cuda._sleep(int(0.05 * 1.98e9))
    res["a_after_sync"].append(timed(call)); res["a_second"].append(timed(call))
    torch.cuda.synchronize(); torch.cuda._sleep(int(0.05 * 1.98e9))
    t_end = time.perf_counter() + 0.002
    x = 0
    while time.perf_counter() < t_end: x += 1
    res["b_after_spin"].append(timed(call))
    torch.cuda.synchronize(); torch.cuda._sleep(int(0.05 * 1.98e9)); time.sleep(0.002)
    res["c_after_sleep_only"].append(timed(call))
    torch.cuda.synchronize()
    opt.zero_grad(set_to_none=True)
    loop.forward_backward()          # no sync: the GPU is busy with it, as in a training loop
    res["d_loop_step_host"].append(timed(opt.step))
    res["d_loop_second_call"].append(timed(call))
    torch.cuda.synchronize()
print(kind, {k: round(statistics.median(v), 1) for k, v in res.items() if v}, flush=True)
