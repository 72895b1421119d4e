"""session 20: where the GPU time of opt.step() starts, in the Llama 98M loop: host time from the
call to the first launch API call (torch.profiler CPU trace) and the kernels' own span (CUDA trace)."""
import sys, json, statistics, torch
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev20_loop import warm_loop
from torch.profiler import profile, ProfilerActivity, record_function
out = {}
for kind in sys.argv[1:]:
    opt, loop = warm_loop(kind)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(8):
            opt.zero_grad(set_to_none=True)
            loop.forward_backward()
            with record_function("PROBE_STEP"):
                opt.step()
            torch.cuda.synchronize()
    ev = [e for e in prof.events()]
    steps = sorted([e for e in ev if e.name == "PROBE_STEP" and e.device_type.name == "CPU"], key=lambda e: e.time_range.start)
    launches = [e for e in ev if e.device_type.name == "CPU" and e.name in ("cudaGraphLaunch", "cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "cuGraphLaunch")]
    kernels = [e for e in ev if e.device_type.name == "CUDA"]
    first, host, span = [], [], []
    for s in steps:
        a, b = s.time_range.start, s.time_range.end
        inside = sorted(l.time_range.start for l in launches if a <= l.time_range.start <= b)
        host.append((b - a) / 1e3)
        if inside:
            first.append((inside[0] - a) / 1e3)
    out[kind] = {"host_ms": statistics.median(host), "to_first_launch_ms": statistics.median(first) if first else None,
                 "launch_apis": sorted({l.name for l in launches})}
    print(kind, json.dumps(out[kind]), flush=True)
    del opt, loop
    torch.cuda.empty_cache()
