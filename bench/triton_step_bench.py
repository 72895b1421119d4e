"""LuminaV's Triton kernels (JIT) side by side with its nvcc kernels, torch's fused AdamW and a device copy.

One run, one GPU, N = 2^28 elements as one tensor: CLM fp32 (finite check on), bf16 parameters with
fp32 masters, TD-CLM factored on a 16384 x 16384 matrix. CUDA-event medians of --reps steps after
--warmup; GB/s count the fewest bytes each step must move (every input read once, every output written
once, the finite check's read of the gradient included where it runs). Also the first step's compile
time in a fresh process with an empty Triton cache, and in a second process reusing that cache.

    python3 bench/triton_step_bench.py --out triton.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

from luminamoon.optim import LuminaV

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import cuda_event_median  # noqa: E402


def copy_gbs(n: int) -> float:
    src = torch.empty(n, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_event_median(lambda: dst.copy_(src), 3, 10)[0]
    return 8 * n / (ms * 1e-3) / 1e9


class SynchronousStep:
    """luminav_step on one tensor through a named backend (luminamoon.optim.step): the synchronous
    entry point, whose finite check reads its verdict back to the host before pass 2. The same path
    for the nvcc kernels ("cuda") and the Triton AOT kernels ("triton-aot"), so the two compare."""

    def __init__(self, p: torch.nn.Parameter, backend: str, mode: str = "clm", td_factor: str = "factored"):
        from luminamoon import optim
        self.optim, self.p, self.backend, self.t = optim, p, backend, 0
        self.td_factor = td_factor
        self.buffer_mode = 1 if mode == "tdclm" else 2
        self.m = torch.zeros(p.shape, device=p.device, dtype=torch.float32)
        if mode == "tdclm":  # TD-CLM's second moment: R + C, R or 1 floats (td_factor)
            rows, cols = p.shape[0], p.numel() // p.shape[0]
            length = {"factored": rows + cols, "row": rows, "tensor": 1}[td_factor]
            self.v = torch.zeros(length, device=p.device, dtype=torch.float32)
        else:
            self.v = torch.zeros_like(self.m)
        self.master = p.detach().float().clone() if p.dtype != torch.float32 else None

    def step(self):
        self.t += 1
        self.optim.step(self.p.data, self.p.grad, self.m, self.v, self.master, lr=1e-3, beta1=0.9, beta2=0.999,
                        eps=1e-8, weight_decay=0.01, step=self.t, backend=self.backend,
                        buffer_mode=self.buffer_mode, td_factor=self.td_factor)


def optimizer(kind: str, p: torch.nn.Parameter, mode: str, td_factor: str):
    if kind in ("luminav_step_nvcc", "luminav_step_triton_aot"):
        return SynchronousStep(p, "cuda" if kind == "luminav_step_nvcc" else "triton-aot", mode, td_factor)
    if kind == "torch_fused_adamw":
        return torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, fused=True)
    backend = {"luminav_nvcc": "auto", "luminav_triton": "triton", "luminav_triton_aot": "triton-aot"}[kind]
    extra = {"td_factor": td_factor} if mode == "tdclm" else {}
    return LuminaV([p], lr=1e-3, weight_decay=0.01, mode=mode, backend=backend, **extra)


CASES = {
    # name: (shape, param dtype, mode, bytes per element)
    "clm_f32": ((1 << 28,), torch.float32, "clm", 32),                 # p g m v in, p m v out, g (check)
    "clm_bf16_master": ((1 << 28,), torch.bfloat16, "clm", 30),        # g2 m v w in, p2 m v w out, g2 (check)
    # TD-CLM factored: the gradient read twice (the factor sums, pass 2; Note [Triton factor tiles]
    # and the nvcc kernels' Note [factor tiles]); session 5 counted 28 and 24 B with a third read.
    "tdclm_factored_f32": ((1 << 14, 1 << 14), torch.float32, "tdclm", 24),  # p g m in, p m out, g (sums)
    # TD-CLM's other forms and 16-bit parameters (issue 18 session 5: the AOT TD-CLM set)
    "tdclm_factored_bf16_master": ((1 << 14, 1 << 14), torch.bfloat16, "tdclm", 22),  # g2 x2, m w in/out, p2 out
    "tdclm_row_f32": ((1 << 14, 1 << 14), torch.float32, "tdclm", 24),       # g x2 (row sums, apply)
    "tdclm_tensor_f32": ((1 << 14, 1 << 14), torch.float32, "tdclm", 24),    # g x2 (sum g^2, apply)
}
TD_FACTOR = {"tdclm_row_f32": "row", "tdclm_tensor_f32": "tensor"}  # the others: factored


# LuminaV's asynchronous steps (luminav_step_groups: the nvcc kernels, the Triton JIT, the Triton AOT kernels)
ASYNC_KINDS = ("luminav_nvcc", "luminav_triton", "luminav_triton_aot")


def run_case(name: str, kinds: list[str], warmup: int, reps: int, copy: float = 0.0, replay: bool = False) -> dict:
    shape, dtype, mode, bytes_per = CASES[name]
    n = 1
    for s in shape:
        n *= s
    out = {}
    for kind in kinds:
        if kind == "torch_fused_adamw" and (mode != "clm" or dtype != torch.float32):
            continue  # torch keeps no fp32 masters and no TD-CLM
        td_factor = TD_FACTOR.get(name, "factored")
        if kind == "luminav_step_nvcc" and mode == "tdclm" and td_factor != "tensor":
            continue  # the nvcc kernels run factored/row in the asynchronous step only
        torch.manual_seed(0)
        p = torch.nn.Parameter(torch.randn(shape, device="cuda").to(dtype))
        p.grad = (0.01 * torch.randn(shape, device="cuda")).to(dtype)
        opt = optimizer(kind, p, mode, td_factor)
        per = bytes_per if kind != "torch_fused_adamw" else 28  # no finite check
        ms = cuda_event_median(opt.step, warmup, reps)[0]
        out[kind] = {"ms": ms, "gbs": per * n / (ms * 1e-3) / 1e9, "bytes_per_element": per}
        share = f"  {100 * out[kind]['gbs'] / copy:4.0f}% of copy" if copy else ""
        print(f"{name:20s} {kind:24s} {ms:8.3f} ms  {out[kind]['gbs']:7.0f} GB/s{share}", flush=True)
        if replay and kind in ASYNC_KINDS:  # the asynchronous steps: opt.step() as a graph
            from optim_training_loop import graphed_step
            try:
                ms = cuda_event_median(graphed_step(opt), warmup, reps)[0]
            except Exception as e:  # noqa: BLE001 - a step that cannot be captured is reported, not fatal
                print(f"{name:20s} {kind + ' replay':24s} not captured: {type(e).__name__}: {e}", flush=True)
                out[kind]["replay_error"] = f"{type(e).__name__}: {e}"
                del opt, p
                torch.cuda.empty_cache()
                continue
            out[kind].update(replay_ms=ms, replay_gbs=per * n / (ms * 1e-3) / 1e9)
            share = f"  {100 * out[kind]['replay_gbs'] / copy:4.0f}% of copy" if copy else ""
            print(f"{name:20s} {kind + ' replay':24s} {ms:8.3f} ms  {out[kind]['replay_gbs']:7.0f} GB/s{share}",
                  flush=True)
        del opt, p
        torch.cuda.empty_cache()
    return out


FIRST_STEP = r"""
import time, torch
t0 = time.perf_counter()
from luminamoon.optim import LuminaV
p = torch.nn.Parameter(torch.randn(1 << 20, device="cuda"))
p.grad = torch.randn_like(p)
opt = LuminaV([p], backend="triton")
t1 = time.perf_counter()
opt.step(); torch.cuda.synchronize()
t2 = time.perf_counter()
opt.step(); torch.cuda.synchronize()
t3 = time.perf_counter()
print(f"{t2 - t1:.4f} {t3 - t2:.4f}")
"""


def compile_times() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", FIRST_STEP], env=env, capture_output=True, text=True,
                                 timeout=300)
            if out.returncode != 0:
                return {"error": out.stderr[-2000:]}
            first, second = (float(x) for x in out.stdout.split()[-2:])
            runs.append({"first_step_s": first, "second_step_s": second})
    result = {"empty_cache": runs[0], "warm_cache": runs[1]}
    print("first step (CLM fp32, 2^20): empty cache %.2f s, cache reused %.2f s; a later step %.4f s"
          % (runs[0]["first_step_s"], runs[1]["first_step_s"], runs[1]["second_step_s"]), flush=True)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--kinds", nargs="*", default=["luminav_nvcc", "luminav_triton", "torch_fused_adamw"],
                    help="also luminav_triton_aot (LuminaV on the Triton AOT kernels), luminav_step_nvcc, "
                    "luminav_step_triton_aot (the synchronous luminav_step)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--skip-compile", action="store_true", help="skip the first-step compile timing")
    ap.add_argument("--replay", action="store_true", help="also the asynchronous steps as CUDA-graph replays")
    ap.add_argument("--out")
    args = ap.parse_args()
    t0 = time.time()
    result = {"machine": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": __import__("triton").__version__, "copy_gbs": copy_gbs(1 << 28), "cases": {}}
    print(f"device copy {result['copy_gbs']:.0f} GB/s", flush=True)
    if not args.skip_compile:
        result["compile"] = compile_times()
    for name in args.cases:
        result["cases"][name] = run_case(name, args.kinds, args.warmup, args.reps, result["copy_gbs"], args.replay)
    result["wall_s"] = time.time() - t0
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
