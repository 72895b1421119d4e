"""LuminaV's CUDA backend side by side with torch.optim.AdamW(fused=True) and a device copy.

One run, one GPU: N = 2^28 fp32 elements as one tensor and as a GPT-like list
of tensors of the same total; CLM (with and without the finite check), TD-CLM
and bf16 parameters with fp32 master weights. Times are CUDA-event medians of
--reps steps after --warmup; GB/s count the fewest bytes each step must move
(every input read once, every output written once; the finite check's extra
read of the gradient is counted where it runs). Prints a table and writes JSON.

    LUMINAV_LIBRARY=/path/libluminav.so python3 bench/cuda_step_bench.py --out bench.json
"""
from __future__ import annotations

import argparse
import ctypes as C
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "optim"))  # test_gpu_cuda
import test_gpu_cuda as t  # noqa: E402  (ctypes structs and the library loader)
from harness import cuda_event_median  # noqa: E402


def gpt_like_sizes(total: int, d: int = 2048, vocab: int = 50304) -> list[int]:
    """Embedding, then per layer: ln1 (w,b), qkv, proj, ln2 (w,b), fc1, fc2 (+ biases); the rest last."""
    sizes = [vocab * d]
    layer = [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    while sum(sizes) + sum(layer) <= total:
        sizes += layer
    sizes.append(total - sum(sizes))  # final layer norm and head remainder
    return [s for s in sizes if s > 0]


class LuminaSteps:
    """Device buffers of a list of tensors and the luminav_step_multi call over them."""

    def __init__(self, lib, sizes, mode, param_dtype=t.F32, master=False, gen=None):
        self.lib = lib
        dev = torch.device("cuda")
        dt = t.TORCH_DTYPE[param_dtype]
        self.bufs = []
        structs = []
        for n in sizes:
            x32 = torch.randn(n, device=dev, generator=gen) * 0.5
            g = (torch.randn(n, device=dev, generator=gen) * 0.01).to(dt)
            m = torch.randn(n, device=dev, generator=gen) * 0.01
            v = (torch.rand(n, device=dev, generator=gen) + 0.05) * 1e-4 if mode == 2 else \
                torch.full((1,), 4e-5, device=dev)
            mw = x32.clone() if master else None
            x = x32.to(dt)
            self.bufs.append((x, g, m, v, mw))
            structs.append(t.Tensor(x.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr(),
                                    mw.data_ptr() if mw is not None else None, n, 0, len(structs),
                                    param_dtype, param_dtype, 0, 2))  # TD-CLM: v1's scalar s
        self.tensors = (t.Tensor * len(structs))(*structs)
        self.count = len(structs)
        self.options = t.Options(backend=b"cuda", device_type=1,
                                 stream=torch.cuda.current_stream().cuda_stream)
        self.step_index = 0

    def step(self, hp):
        self.step_index += 1
        hp.step = self.step_index
        rc = self.lib.luminav_step_multi(C.byref(hp), self.tensors, self.count, C.byref(self.options))
        if rc != 0:
            raise RuntimeError(self.lib.luminav_last_error_message().decode())


def torch_adamw(sizes, gen):
    params = []
    for n in sizes:
        p = torch.nn.Parameter(torch.randn(n, device="cuda", generator=gen) * 0.5)
        p.grad = torch.randn(n, device="cuda", generator=gen) * 0.01
        params.append(p)
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=True)
    return params, opt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="comma-separated case names")
    args = ap.parse_args()

    lib = t.load_library()
    reason = t.backend_reason(lib, "cuda")
    if reason is not None:
        print("cuda backend unavailable:", reason)
        return 1
    n = 1 << args.log2n
    gen = torch.Generator(device="cuda").manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    rows = []

    def record(name, ms, bytes_moved, times, note=""):
        rows.append(dict(case=name, ms=ms, bytes=bytes_moved, gbps=bytes_moved / ms / 1e6,
                         times_ms=times, note=note))
        print(f"  {name:44s} {ms:8.3f} ms  {bytes_moved / ms / 1e6:8.1f} GB/s  {note}", flush=True)

    wanted = set(args.only.split(",")) if args.only else None

    def want(name):
        return wanted is None or name in wanted

    # The ceiling: a device-to-device copy of N fp32 (bytes read + written).
    src = torch.randn(n, device="cuda", generator=gen)
    dst = torch.empty_like(src)
    ms, times = cuda_event_median(lambda: dst.copy_(src), args.warmup, args.reps)
    record("copy fp32 (read+write)", ms, 8 * n, times)
    copy_gbps = rows[-1]["gbps"]
    del src, dst

    single, gpt = [n], gpt_like_sizes(n)
    print(f"GPT-like list: {len(gpt)} tensors, {sum(gpt)} elements, smallest {min(gpt)}", flush=True)
    for label, sizes in (("1 tensor", single), (f"{len(gpt)} tensors", gpt)):
        if want("torch"):
            params, opt = torch_adamw(sizes, gen)
            ms, times = cuda_event_median(opt.step, args.warmup, args.reps)
            record(f"torch AdamW fused, {label}", ms, 28 * n, times)
            del params, opt
            torch.cuda.empty_cache()
        cases = [
            ("clm", dict(), 2, t.F32, False, 32, "CLM defaults (finite check on)"),
            ("clm_nocheck", dict(check_finite=0), 2, t.F32, False, 28, "CLM, finite check off"),
            ("tdclm", dict(buffer_mode=1), 1, t.F32, False, 24, "TD-CLM defaults"),
            ("clm_bf16_master", dict(), 2, t.BF16, True, 30, "CLM bf16 p/g + fp32 master"),
            ("clm_all_options", dict(lam=0.1, tau=1.0, cautious=1, bound_mode=1, bound_ratio=1e-3), 2, t.F32,
             False, 44, "CLM lam,tau,cautious,tensor bound"),
        ]
        for key, opts, mode, pdt, master, bpe, note in cases:
            if not want(key):
                continue
            steps = LuminaSteps(lib, sizes, mode, pdt, master, gen)
            hp = t.hyperparams(lib, **opts)
            ms, times = cuda_event_median(lambda: steps.step(hp), args.warmup, args.reps)
            record(f"luminav {key}, {label}", ms, bpe * n, times, note)
            del steps
            torch.cuda.empty_cache()

    # Ratios, side by side.
    by = {r["case"]: r for r in rows}
    print("\nsummary (copy %.0f GB/s on %s, torch %s):" % (copy_gbps, props.name, torch.__version__))
    for r in rows:
        frac = r["gbps"] / copy_gbps
        anchor = None
        for label in ("1 tensor", f"{len(gpt)} tensors"):
            if r["case"].endswith(label):
                anchor = by.get(f"torch AdamW fused, {label}")
        vs = f"  x{anchor['ms'] / r['ms']:.2f} vs torch" if anchor and anchor is not r else ""
        print(f"  {r['case']:44s} {r['ms']:8.3f} ms  {100 * frac:5.1f}% of copy{vs}")
    for key in ("clm", "clm_nocheck", "tdclm", "clm_bf16_master"):
        a, b = by.get(f"luminav {key}, 1 tensor"), by.get(f"luminav {key}, {len(gpt)} tensors")
        if a and b:
            print(f"  list vs single {key}: {100 * (b['ms'] / a['ms'] - 1):+.1f}%")
    if args.out:
        Path(args.out).write_text(json.dumps(dict(device=props.name, torch=torch.__version__, n=n,
                                                  gpt_sizes=gpt, copy_gbps=copy_gbps, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
