"""Where the host time of a Triton step goes in the user's loop (issue 18): the Llama model of
bench/optim_training_loop.py, LuminaV(backend="triton") in CLM or TD-CLM mode, a few training steps
(zero_grad(set_to_none=True), forward, backward, step); for each step whether it replayed its
recorded launches (Note [replayed launches]) or why not and how many ran as a CUDA graph (Note [Triton
step graphs]), then cProfile of opt.step() over the
following steps, the top functions by cumulative time.

    python bench/triton_step_profile.py --mode tdclm [--steps 10]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from optim_training_loop import Loop, llama  # noqa: E402

from luminamoon.optim import LuminaV  # noqa: E402


def why_not_replayed(plan, before) -> str:
    """What the last step did with its launch record."""
    if plan is None:
        return "no plan"
    if plan._record is None:
        return "no record made (a launch was not recordable, or the step had no key)"
    if plan._record is before:
        return "replayed"
    return "recorded anew (the key changed: " + ("first step" if before is None else "flags or alignment") + ")"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="tdclm", choices=("clm", "tdclm"))
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
    model = llama("cuda", **cfg)
    opt = LuminaV(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, mode=args.mode,
                  backend="triton")
    loop = Loop(model, opt, 2, cfg["seq"], cfg["vocab"], "cuda")
    plans_seen = set()
    for i in range(args.steps):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        plan = opt._plans[0].native if getattr(opt, "_plans", None) else None
        before = plan._record if plan is not None else None
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.step()
        host = (time.perf_counter() - t0) * 1e3
        plan = opt._plans[0].native if opt._plans else None
        plans_seen.add(id(plan))
        graphs = plan.graphs.replays if plan is not None else 0
        print(f"step {i}: host {host:.3f} ms, {why_not_replayed(plan, before)}; graph replays so far {graphs}; "
              f"plans so far {len(plans_seen)}", flush=True)
    prof = cProfile.Profile()
    for _ in range(args.steps):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        torch.cuda.synchronize()
        prof.enable()
        opt.step()
        prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
