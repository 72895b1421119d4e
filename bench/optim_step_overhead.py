"""Time of one optimizer step, LuminaV vs torch.optim.AdamW (foreach and fused), many small vs few large tensors.

    .venv/bin/python bench/optim_step_overhead.py --reps 30 --rounds 5

Rounds alternate the two optimizers; the figure is the median over all
repetitions. torch runs with one intra-op thread (as LuminaV's front end has
none; its native kernels use LuminaV's own threads, LUMINAV_NUM_THREADS).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from luminamoon.optim import LuminaV, last_backend

CASES = {"200 tensors x 1K": [(1000,)] * 200, "20 tensors x 1M": [(1000, 1000)] * 20}


def timed_steps(opt, reps):
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        opt.step()
        out.append(time.perf_counter() - start)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| case | AdamW foreach, ms | AdamW fused, ms | LuminaV CLM, ms | LuminaV / foreach | LuminaV / fused |")
    print("|---|---|---|---|---|---|")
    for label, shapes in CASES.items():
        params = [torch.nn.Parameter(torch.randn(*s)) for s in shapes]
        for p in params:
            p.grad = torch.randn_like(p)
        opts = {"foreach": torch.optim.AdamW(params, foreach=True), "fused": torch.optim.AdamW(params, fused=True),
                "luminav": LuminaV(params)}
        for opt in opts.values():
            opt.step()  # state allocated outside the timing
        times = {k: [] for k in opts}
        for _ in range(args.rounds):
            for k, opt in opts.items():
                times[k] += timed_steps(opt, args.reps)
        a, f, b = (statistics.median(times[k]) for k in ("foreach", "fused", "luminav"))
        print(f"| {label} | {a * 1e3:.2f} | {f * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f} | {b / f:.2f} |")
    print(f"\nLuminaV backend: {last_backend()}")


if __name__ == "__main__":
    main()
