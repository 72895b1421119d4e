"""session 20: LuminaV's native CUDA step, host time with the GPU busy, many calls (for perf)."""
import sys, os, time, statistics, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev20_loop import warm_loop
kind, calls = sys.argv[1], int(sys.argv[2])
opt, loop = warm_loop(kind)
plan = opt._plans[0]
s = torch._C._cuda_getCurrentRawStream(0)
times = []
for i in range(calls):
    if i % 50 == 0:
        torch.cuda.synchronize()
        torch.cuda._sleep(int(0.05 * 1.98e9))
    t1 = time.perf_counter()
    plan.native.step(s, 0, 0, opt.skip_nonfinite)
    times.append((time.perf_counter() - t1) * 1e6)
torch.cuda.synchronize()
print(kind, os.environ.get("LUMINAV_CUDA_GRAPHS"), os.environ.get("LUMINAV_CUDA_STEP_AGAIN"),
      "native step us: median", round(statistics.median(times), 1), "p10", round(sorted(times)[len(times)//10], 1), flush=True)
