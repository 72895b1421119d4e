"""The host side of LuminaV(backend="triton")'s step without a GPU: the plan's own Python per step.

Issue 18 (session 3): the eager Triton step of the Llama 98M loop took 3.47 ms of GPU time against
the nvcc backend's 1.50 ms because the host could not queue it faster (3.06 ms of host time). This
times what the plan does on the host per step for the loop's 111 tensors (one param group, fp32,
the tensors' ranks and count of the Llama model at a smaller width: the Python per tensor does not
depend on a tensor's size), with every kernel launch replaced by a stub that does nothing:

  launched  each step through the launch path (tables checked, per-tensor work) as before
  replayed  Note [replayed launches]: the step's recorded launches called again
  ... new grads  the same with every gradient a new tensor on each step (two sets in turn), as
            after zero_grad(set_to_none=True) in a training loop; "swap alone" is that
            assignment's own cost, in every "new grads" figure

Triton's own per-launch cost (the JIT binder, the launcher) is not in either figure: it needs a GPU
driver (bench/triton_gpu_run.sh loop/loopreplay measure the whole on the H200).

  TRITON_INTERPRET=1 python bench/triton_host_overhead.py [--rounds 7] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if os.environ.get("TRITON_INTERPRET") != "1":
    sys.exit("run with TRITON_INTERPRET=1 (the plan is built on CPU tensors)")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from luminamoon.optim import LuminaV  # noqa: E402
from luminamoon.optim import triton_kernels as tk  # noqa: E402
from luminamoon.optim import triton_step  # noqa: E402


class _NoOpCompiled:
    """What a compiled kernel offers a replay (triton_launch_cache.py); its launch does nothing."""
    function, packed_metadata = 0, 0

    def launch_metadata(self, grid, stream, *args):
        return None

    def run(self, *args):
        return None


class _StubKernel:
    """Stands in for a @triton.jit kernel: kernel[grid](...) returns a compiled kernel and launches nothing."""

    def __init__(self, real):
        self.arg_names = real.arg_names
        self.compiled = _NoOpCompiled()

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.compiled


def llama_shapes(hidden: int, layers: int, mlp: int, vocab: int) -> list[tuple[int, ...]]:
    """The parameter shapes of bench/optim_training_loop.py's Llama model (111 tensors at 12 layers)."""
    layer = [(hidden, hidden)] * 4 + [(mlp, hidden), (mlp, hidden), (hidden, mlp), (hidden,), (hidden,)]
    return [(vocab, hidden)] + layer * layers + [(hidden,), (vocab, hidden)]


def plan_of(shapes, replay: bool):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = LuminaV(params, lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, backend="triton")
    opt.step()  # builds the plan (stub launches)
    plan = opt._plans[0].native
    plan._replayable = replay  # the CPU's plan never replays (its kernels are interpreted): here they are stubs
    return opt, plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--json")
    args = ap.parse_args()
    for name in ("prepare_kernel", "reduce_kernel", "factor_sums_kernel", "factor_rows_kernel", "factor_cols_kernel",
                 "finalize_kernel", "apply_kernel", "finite_check_multi_kernel", "apply_multi_kernel", "commit_kernel",
                 "advance_kernel"):
        setattr(tk, name, _StubKernel(getattr(tk, name)))
    triton_step._current_stream = lambda device: 0
    shapes = llama_shapes(hidden=64, layers=12, mlp=128, vocab=256)
    launched, plan_l = plan_of(shapes, replay=False)
    replayed, plan_r = plan_of(shapes, replay=True)
    replayed.step()
    assert plan_r._record is not None and plan_l._record is None
    # Every gradient a new tensor on each step: two sets of gradients assigned in turn.
    swapped, plan_s = plan_of(shapes, replay=True)
    sets = [[p.grad for p in plan_s._params], [torch.randn_like(p) for p in plan_s._params]]
    turn = [0]

    def swap():
        turn[0] ^= 1
        for p, g in zip(plan_s._params, sets[turn[0]]):
            p.grad = g

    def swap_and(fn):
        def run():
            swap()
            return fn()
        return run

    timings = harness.measure_side_by_side({"launched": lambda: plan_l.step(None, None, False),
                                            "replayed": lambda: plan_r.step(None, None, False),
                                            "opt.step() replayed": replayed.step,
                                            "swap alone": swap,
                                            "plan step, new grads": swap_and(lambda: plan_s.step(None, None, False)),
                                            "opt.step(), new grads": swap_and(swapped.step)},
                                           rounds=args.rounds, min_time=args.min_time)
    record = plan_s._record
    swap()
    swapped.step()
    result_replays_new_grads = record is not None and plan_s._record is record
    result = {"machine": harness.machine(), "tensors": len(shapes), "rounds": args.rounds,
              "us_per_step": {k: round(t.wall_s * 1e6, 1) for k, t in timings.items()},
              "cpu_us_per_step": {k: round(t.cpu_s * 1e6, 1) for k, t in timings.items()}}
    result["launched_over_replayed"] = round(timings["launched"].wall_s / timings["replayed"].wall_s, 1)
    result["new_grads_replay_the_record"] = result_replays_new_grads
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
