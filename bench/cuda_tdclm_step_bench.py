"""The CUDA backend's TD-CLM step, eager and as a CUDA-graph replay, on the Llama 98M parameter list
and on one 16384 x 16384 matrix, with CLM on the same tensors as the anchor (issue 13, session 5).

Gradients are random tensors of the parameters' shapes (no forward pass: the step's kernels alone).
Run it once per build, alternating builds, to compare kernels side by side:

    PYTHONPATH=/tmp/site_a python3 bench/cuda_tdclm_step_bench.py --label after --json a.json

Bytes per parameter (fp32): CLM 32 (p g m v read, p m v written, the finite check's read of g);
TD-CLM factored 24 where the gradient is read once before the update (p g m read, p m written, g).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import cuda_event_median  # noqa: E402
from optim_training_loop import graphed_step  # noqa: E402  (opt.step() captured in a CUDA graph)

LLAMA = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)  # bench/optim_training_loop.py's


def llama_shapes() -> list[tuple[int, ...]]:
    from llama_model import llama
    model = llama("meta", **LLAMA)
    return [tuple(p.shape) for p in model.parameters()]


def measure(shapes, mode: str, backend: str, reps: int) -> dict:
    from luminamoon.optim import LuminaV
    gen = torch.Generator(device="cuda").manual_seed(0)
    params = []
    for s in shapes:
        p = torch.nn.Parameter(torch.randn(s, device="cuda", generator=gen) * 0.02)
        p.grad = torch.randn(s, device="cuda", generator=gen) * 1e-3
        params.append(p)
    opt = LuminaV(params, lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, mode=mode, backend=backend)
    eager = cuda_event_median(opt.step, 3, reps)[0]
    row = {"eager_ms": eager}
    try:
        replay = graphed_step(opt)
        row["replay_ms"] = cuda_event_median(replay, 3, reps)[0]
    except Exception as exc:  # report, do not hide
        row["replay_error"] = f"{type(exc).__name__}: {exc}"
    n = sum(p.numel() for p in params)
    row["params"] = n
    del opt, params
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--triton", action="store_true", help="also the Triton JIT backend's TD-CLM at 16384^2")
    ap.add_argument("--json")
    args = ap.parse_args()
    cases = {"llama98m": llama_shapes(), "square16384": [(1 << 14, 1 << 14)]}
    result = {"label": args.label, "machine": torch.cuda.get_device_name(), "rows": {}}
    for case, shapes in cases.items():
        for mode in ("clm", "tdclm"):
            key = f"{case}/{mode}/cuda"
            result["rows"][key] = measure(shapes, mode, "auto", args.reps)
            print(args.label, key, json.dumps(result["rows"][key]), flush=True)
        if args.triton and case == "square16384":
            key = f"{case}/tdclm/triton"
            result["rows"][key] = measure(shapes, "tdclm", "triton", args.reps)
            print(args.label, key, json.dumps(result["rows"][key]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
