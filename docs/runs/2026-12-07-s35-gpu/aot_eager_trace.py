"""Session 35: why the AOT TD-CLM step's eager GPU time in the Llama 98M loop (1.273 ms, call 1) exceeds its graph
replay (0.861) and the JIT's eager time (0.844). For TD-CLM on triton-aot, the JIT and nvcc, after a backward
pass as gpu_step_ms measures it: under torch.profiler, where in opt.step() (host time) its first and last kernel
launch come, how many launches, and the GPU's idle time inside the step; then cProfile's top of the AOT step.
  PYTHONPATH=<site>:bench python3 aot_eager_trace.py"""
from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import optim_training_loop as lb  # noqa: E402

LAUNCH = ("cuLaunchKernel", "cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "cudaGraphLaunch",
          "cuGraphLaunch")


def one(kind: str) -> None:
    torch.manual_seed(0)
    model = lb.llama("cuda", hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
    loop = lb.Loop(model, lb.make_optimizer(kind, model), 16, 512, 8192, "cuda")
    for _ in range(3):
        loop.step()
    torch.cuda.synchronize()
    rows = []
    for _ in range(4):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            with record_function("opt_step"):
                loop.opt.step()
            torch.cuda.synchronize()
        ev = prof.events()
        step = next(e for e in ev if e.name == "opt_step" and e.device_type.name == "CPU")
        t0, t1 = step.time_range.start, step.time_range.end
        launches = sorted(e.time_range.start - t0 for e in ev if e.name in LAUNCH and t0 <= e.time_range.start <= t1)
        kernels = sorted((e.time_range.start, e.time_range.end) for e in ev if e.device_type.name == "CUDA"
                         and not e.name.startswith("Memcpy") and not e.name.startswith("Memset"))
        busy = sum(b - a for a, b in kernels)
        span = (kernels[-1][1] - kernels[0][0]) if kernels else 0
        rows.append((t1 - t0, launches[0] if launches else -1, launches[-1] if launches else -1, len(launches),
                     len(kernels), busy, span))
    med = [statistics.median(r[i] for r in rows) for i in range(7)]
    print(f"{kind:28s} host {med[0]:7.0f} us, first launch at {med[1]:6.0f} us, last at {med[2]:6.0f} us, "
          f"{med[3]:.0f} launch calls, {med[4]:.0f} kernels, kernels busy {med[5]:6.0f} us over a span of "
          f"{med[6]:6.0f} us", flush=True)
    if kind.endswith("_aot"):
        prof = cProfile.Profile()
        for _ in range(3):
            loop.opt.zero_grad(set_to_none=True)
            loop.forward_backward()
            prof.enable()
            loop.opt.step()
            prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    del loop, model
    torch.cuda.empty_cache()


for k in ("luminav_tdclm_triton_aot", "luminav_tdclm_triton", "luminav_tdclm"):
    one(k)
