"""Session 36 (issue 18): where the factored TD-CLM step's time goes at 2^28 on this GPU, kernel by kernel.
For the factored bf16 + masters and fp32 cases of bench/triton_step_bench.py and the nvcc, JIT and AOT steps:
torch.profiler over --steps eager steps after a warm-up, each kernel's total GPU time per step (us), its
launches per step, and the bytes per element it must move as a share of the device copy where the kernel is
one of the two passes (sums: the gradient once; apply: the rest).
  PYTHONPATH=<site>:bench python3 kernel_profile.py [--steps 10] [--json OUT]"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import triton_step_bench as tb  # noqa: E402


def profile_case(case: str, kind: str, steps: int) -> dict:
    shape, dtype, mode, _ = tb.CASES[case]
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(shape, device="cuda").to(dtype))
    p.grad = (0.01 * torch.randn(shape, device="cuda")).to(dtype)
    opt = tb.optimizer(kind, p, mode, tb.TD_FACTOR.get(case, "factored"))
    for _ in range(3):
        opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            opt.step()
        torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type.name == "CUDA":
            per[e.name][0] += (e.time_range.end - e.time_range.start) / steps
            per[e.name][1] += 1
    del opt, p
    torch.cuda.empty_cache()
    rows = sorted(((name, us, count / steps) for name, (us, count) in per.items()), key=lambda r: -r[1])
    return {"total_us": sum(r[1] for r in rows), "kernels": [{"name": n, "us": us, "per_step": c} for n, us, c in rows]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--cases", nargs="*", default=["tdclm_factored_bf16_master", "tdclm_factored_f32"])
    ap.add_argument("--kinds", nargs="*", default=["luminav_nvcc", "luminav_triton", "luminav_triton_aot"])
    ap.add_argument("--json")
    args = ap.parse_args()
    copy = tb.copy_gbs(1 << 28)
    n = 1 << 28
    print(f"{torch.cuda.get_device_name()}: device copy {copy:.0f} GB/s", flush=True)
    out = {"gpu": torch.cuda.get_device_name(), "copy_gbs": copy, "cases": {}}
    for case in args.cases:
        bf16 = tb.CASES[case][1] == torch.bfloat16
        sums_bytes = 2 if bf16 else 4
        apply_bytes = tb.CASES[case][3] - sums_bytes
        for kind in args.kinds:
            r = profile_case(case, kind, args.steps)
            out["cases"].setdefault(case, {})[kind] = r
            print(f"{case} {kind}: {r['total_us']:.1f} us of kernels a step", flush=True)
            for k in r["kernels"]:
                name = k["name"]
                floor = ""
                low = name.lower()
                if ("sum" in low and "factor" in low) or "tile" in low:
                    floor = f"  sums at {100 * sums_bytes * n / (k['us'] * 1e-6) / 1e9 / copy:4.0f}% of copy"
                elif "apply" in low or "pass2" in low:
                    floor = f"  apply at {100 * apply_bytes * n / (k['us'] * 1e-6) / 1e9 / copy:4.0f}% of copy"
                print(f"    {k['us']:8.1f} us  x{k['per_step']:.0f}  {name[:90]}{floor}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
