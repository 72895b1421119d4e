"""session 18: where the GPU time of opt.step() goes in the Llama 98M loop, per kernel (torch.profiler),
nvcc kernels against the Triton JIT and torch fused; steps separated by a sync."""
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "bench")
from optim_training_loop import Loop, make_optimizer, llama  # noqa: E402

kinds = sys.argv[1:] or ["torch_fused", "luminav", "luminav_triton", "luminav_tdclm", "luminav_tdclm_triton"]
for kind in kinds:
    model = llama("cuda", 768, 12, 12, 2048, 8192, 512)
    opt = make_optimizer(kind, model)
    loop = Loop(model, opt, 16, 512, 8192, "cuda")
    loop.forward_backward()
    for _ in range(4):
        opt.step()
    torch.cuda.synchronize()
    steps = 8
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            opt.step()
            torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    evs.sort(key=lambda e: e.time_range.start)
    # group into steps: a gap above 40 us separates them (a sync and a host call lie between)
    groups, cur = [], []
    for e in evs:
        if cur and e.time_range.start - max(x.time_range.end for x in cur) > 40:
            groups.append(cur)
            cur = []
        cur.append(e)
    groups.append(cur)
    spans = [g[-1].time_range.end - g[0].time_range.start for g in groups]
    busy = [sum(e.time_range.end - e.time_range.start for e in g) for g in groups]
    print(f"== {kind}: {len(groups)} steps, {statistics.median([len(g) for g in groups])} kernels a step; "
          f"span median {statistics.median(spans):.1f} us, kernel busy {statistics.median(busy):.1f} us")
    per = {}
    for g in groups[1:]:
        for i, e in enumerate(g):
            per.setdefault((i, e.name[:80]), []).append(e.time_range.end - e.time_range.start)
    g = groups[len(groups) // 2]
    for i, e in enumerate(g[:40]):
        gap = e.time_range.start - (g[i - 1].time_range.end if i else e.time_range.start)
        d = statistics.median(per.get((i, e.name[:80]), [e.time_range.end - e.time_range.start]))
        print(f"  {i:3d} gap {gap:6.1f} dur {d:8.1f}  {e.name[:90]}")
    del opt, model, loop
    torch.cuda.empty_cache()
