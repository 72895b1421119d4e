"""Where the host time of LuminaV's CUDA step goes (issue 13): the whole opt.step(), the
native call alone, and cProfile's view, with the GPU kept busy so that nothing waits.

  python bench/optim_host_profile.py
  LUMINAV_TRACE_HOST=1 python bench/optim_host_profile.py --device cpu [--steps 40]

--device cpu: the same question for the CPU step, right after a backward pass (the
"cold" case: new gradient tensors made by autograd, caches full of the model's work)
and again at once ("warm": the same gradients), on a model of 111 tiny tensors (the
H200 Llama's tensor count, TinyDeepModel) against torch's fused AdamW in the same process; with
LUMINAV_TRACE_HOST=1 also the median of each host stage (Note [host trace]).
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch

from luminamoon.optim import LuminaV


class TinyDeepModel(torch.nn.Module):
    """111 tensors (the H200 Llama's count) of at most 32 x 32: on the CPU the step's arithmetic is
    nil and its cost is the front end's; plain torch (no transformers needed)."""

    def __init__(self, width: int = 32, layers: int = 55):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.head = torch.nn.Linear(width, 1, bias=False)
        self.x = torch.randn(8, width)

    def loss(self) -> torch.Tensor:
        h = self.x
        for layer in self.layers:
            h = torch.tanh(layer(h))
        return self.head(h).square().mean()


def cpu_after_backward(steps: int) -> None:
    torch.set_num_threads(2)
    runs = {}
    for kind in ("luminav", "torch_fused"):
        model = TinyDeepModel()
        opt = (LuminaV(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1) if kind == "luminav"
               else torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True))
        runs[kind] = (model, opt)
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model.loss().backward()
            opt.step()
    model = runs["luminav"][0]
    tensors = sum(1 for _ in model.parameters())
    plan = runs["luminav"][1]._plans[0].native
    times = {(kind, when): [] for kind in runs for when in ("cold", "warm")}
    stages: dict[str, list[float]] = {}
    for i in range(steps):
        for kind, (model, opt) in (runs.items() if i % 2 == 0 else reversed(runs.items())):  # alternated
            opt.zero_grad(set_to_none=True)
            model.loss().backward()
            for when in ("cold", "warm"):  # right after the backward pass, then at once again
                t0 = time.perf_counter()
                opt.step()
                times[(kind, when)].append(time.perf_counter() - t0)
                if kind == "luminav" and when == "cold":
                    for name, us in plan.last_trace:
                        stages.setdefault(name, []).append(us)
    print(f"CPU, {tensors} tensors ({sum(p.numel() for p in model.parameters())} parameters), {steps} steps "
          f"each, medians; load {os.getloadavg()[0]:.1f}")
    for (kind, when), v in times.items():
        print(f"{kind:12s} {when} opt.step {statistics.median(v) * 1e6:8.1f} us "
              f"({statistics.median(v) * 1e6 / tensors:6.2f} us per tensor)")
    for name, v in stages.items():
        print(f"  luminav cold: {name:16s} {statistics.median(v):8.1f} us")


def main():
    from optim_training_loop import Loop, llama  # transformers: the GPU machine's model
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=40, help="--device cpu: steps per optimizer")
    args = ap.parse_args()
    if args.device == "cpu":
        cpu_after_backward(args.steps)
    else:
        main()
