"""Where the eager Triton step's host time goes in the Llama 98M loop (issue 18 session 3): whether
the gradients keep their addresses between steps (the replay's condition), whether a step
synchronises with the device (torch's sync debug mode "warn": the warnings of opt.step() counted)
and a cProfile of opt.step() over a few steps, with GPU work queued as host_step_ms does.
  python bench/triton_loop_host_profile.py [--steps 6] [--out DIR]"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import optim_training_loop as loop_bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--tag", default="", help="appended to the profile's file name")
    args = ap.parse_args()
    model = loop_bench.llama("cuda", hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
    loop = loop_bench.Loop(model, loop_bench.make_optimizer("luminav_triton", model), 16, 512, 8192, "cuda")
    for _ in range(2):
        loop.step()
    torch.cuda.synchronize()
    params = [p for p in model.parameters()]
    previous, changed, replays, host, syncs = None, [], 0, [], []
    prof = cProfile.Profile()
    for _ in range(args.steps):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        addresses = [p.grad.data_ptr() for p in params]
        if previous is not None:
            changed.append(sum(a != b for a, b in zip(addresses, previous)))
        previous = addresses
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)
        plan = loop.opt._plans[0].native
        record = plan._record
        t0 = time.perf_counter()
        prof.enable()
        loop.opt.step()
        prof.disable()
        host.append((time.perf_counter() - t0) * 1e3)
        replays += record is not None and loop.opt._plans[0].native._record is record
        torch.cuda.synchronize()
    for _ in range(2):  # steps under the sync debug mode: its warnings (host time not taken)
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                loop.opt.step()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        syncs.append([str(w.message)[:120] for w in caught
                      if "synchroniz" in str(w.message).lower() and "prototype" not in str(w.message)])
        torch.cuda.synchronize()
    print("gradients whose address changed per step:", changed, "of", len(params))
    print("steps replayed:", replays, "of", args.steps, "; host ms per step:", [round(h, 3) for h in host])
    print("synchronising calls per step (sync debug mode):", [len(s) for s in syncs], syncs[0][:3] if syncs else "")
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
    (args.out / f"host_profile{args.tag}.txt").write_text(text.getvalue())
    print(text.getvalue()[:3000])


if __name__ == "__main__":
    main()
