"""Where the host time of LuminaV's CUDA step goes (issue 13): the whole opt.step(), the
native call alone, and cProfile's view, with the GPU kept busy so that nothing waits.

  python bench/optim_host_profile.py
"""
from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time

import torch

from luminamoon.optim import LuminaV
from optim_training_loop import Loop, llama


def main():
    cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
    model = llama("cuda", **cfg)
    opt = LuminaV(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    loop = Loop(model, opt, 2, cfg["seq"], cfg["vocab"], "cuda")
    for _ in range(3):
        loop.step()
    torch.cuda.synchronize()
    plan = opt._plans[0]
    stream = torch.cuda.current_stream().cuda_stream
    rows = {"opt.step": [], "opt._native_step": [], "native.step": [], "current_stream": [], "raise_pending": []}
    calls = {"opt.step": opt.step, "opt._native_step": lambda: opt._native_step(False),
             "native.step": lambda: plan.native.step(stream, 0, 0, False),
             "current_stream": lambda: torch.cuda.current_stream(plan.device).cuda_stream,
             "raise_pending": opt._raise_pending}
    for _ in range(20):
        torch.cuda._sleep(int(5e7))  # the GPU stays busy: nothing below waits for it
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            rows[name].append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    for k, v in rows.items():
        print(f"{k:16s} median {statistics.median(v) * 1e6:8.1f} us")
    # In a training loop the step runs right after a backward pass, with the host's caches full of
    # the model's launches (what the loop benchmark's GPU time sees); with LUMINAV_TRACE_HOST=1
    # each step's trace lines follow its marker.
    # Alternating the plan's GIL policy (Note [the GIL in a step]) between steps: kept, and
    # released (the default).
    cold = {True: [], False: []}
    for i in range(16):
        release = i % 2 == 1
        plan.native.release_gil = release
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        print(f"--- step after a backward pass {i}, GIL {'released' if release else 'kept'}", file=sys.stderr,
              flush=True)
        t0 = time.perf_counter()
        opt.step()
        cold[release].append(time.perf_counter() - t0)
        print(f"--- opt.step {cold[release][-1] * 1e6:.1f} us", file=sys.stderr, flush=True)
        torch.cuda.synchronize()
    plan.native.release_gil = True
    for release, times in cold.items():
        print(f"after backward, GIL {'released' if release else 'kept    '} median "
              f"{statistics.median(times) * 1e6:8.1f} us (opt.step)")
    torch.cuda._sleep(int(2e8))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(10):
        opt.step()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
