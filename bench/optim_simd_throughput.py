"""LuminaV's simd backend side by side with the machine's copy bandwidth, torch's CPU AdamW
(fused=True and foreach=True) and the scalar backend, in one run.

Elements per second of one step of one tensor, for N = 2^lo .. 2^hi, for CLM and
TD-CLM with fp32 parameters and with bf16 parameters/gradients plus fp32 master
weights (stochastic rounding on, finite check on: the library's defaults).
Each figure is the median of --repeats timings, each timing the mean of enough
back-to-back steps to last --min-time seconds (after one warm-up step).

The floor of a variant is (bytes it must move per element) / (copy bandwidth),
the bytes counted in src/optim/simd/step_kernels.cc (Note [bytes moved]):
CLM fp32 32 B, TD-CLM fp32 24 B, CLM bf16+master 30 B, TD-CLM bf16+master 22 B
(every input read once, every output written once, plus the gradient read of
the finite check / TD-CLM reduction; "_nocheck" variants turn the check off).
The bandwidth is measured here, in the same run: a STREAM-style copy (bytes
read + bytes written) of two 512 MiB buffers with torch's multi-threaded copy_
and with NumPy's single-threaded memcpy, and torch's multi-threaded in-place
update of one 512 MiB buffer (the optimizer's own pattern: state read and
written back, no write-allocate traffic); the largest is the floor's bandwidth. torch's AdamW moves 28 B per fp32
element (param, grad, exp_avg, exp_avg_sq read; param and both moments written).
"torch fused checked" is fused AdamW behind GradScaler's finite check (the check
at scale 1, then a step skipped on NaN/Inf): the guarantee our default step
gives, the torch way (a read of the gradient plus 28 B, as ours).

    .venvs/simd/bin/python bench/optim_simd_throughput.py --lo 16 --hi 27 --json out.json

Our steps go through luminamoon._native.step_multi with a prebuilt descriptor
(the native entry point the torch front end calls); torch's through
optimizer.step(). Both use the machine's cores (torch.get_num_threads() and
luminav_get_num_threads(), both default to the core count).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

import numpy as np
import torch

from luminamoon import _native

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import measure, measure_side_by_side  # noqa: E402

BYTES_PER_ELEMENT = {
    "clm_f32": 32,
    "clm_f32_nocheck": 28,
    "tdclm_f32": 24,
    "clm_bf16_master": 30,
    "tdclm_bf16_master": 22,
    # TD-CLM v2 (issue 14), the tensor as a near-square R x C matrix: the same
    # bytes as TD-CLM plus R + C factors (negligible); pass 1 sums rows and columns.
    "tdclm_factored_f32": 24,
    "tdclm_factored_bf16_master": 22,
    "torch_f32": 28,
}


def factored_rows(n: int) -> int:
    """R of the near-square R x C view of 2^k elements (R = 2^floor(k/2))."""
    return 1 << (n.bit_length() - 1) // 2


def copy_bandwidth(repeats: int) -> dict:
    """Bytes read + written per second: copies of a 512 MiB buffer (STREAM copy,
    torch's threads and NumPy's single-threaded memcpy) and an in-place update of
    one 512 MiB buffer (read and written back, as the optimizer's state is)."""
    n = 1 << 27  # float32 elements: 512 MiB per buffer
    src = torch.randn(n)
    dst = torch.empty(n)
    torch_s = measure(lambda: dst.copy_(src), repeats, min_time=0.5).wall_s
    a = src.numpy()
    b = dst.numpy()
    numpy_s = measure(lambda: np.copyto(b, a), repeats, min_time=0.5).wall_s
    inplace_s = measure(lambda: src.mul_(1.0), repeats, min_time=0.5).wall_s
    moved = 2 * 4 * n
    return {"torch_copy_GBps": moved / torch_s / 1e9, "numpy_memcpy_GBps": moved / numpy_s / 1e9,
            "torch_inplace_GBps": moved / inplace_s / 1e9}


class Buffers:
    """One N's buffers, shared by every variant and backend (values stay finite)."""

    def __init__(self, n: int):
        self.x32 = torch.randn(n)
        self.master = self.x32.clone()
        self.x16 = self.x32.to(torch.bfloat16)
        self.g32 = torch.randn(n) * 1e-2
        self.g16 = self.g32.to(torch.bfloat16)
        self.m = torch.zeros(n)
        self.v = torch.full((n,), 1e-6)
        self.s = torch.full((1,), 1e-4)
        rows = factored_rows(n)
        self.factors = torch.full((rows + n // rows,), 1e-4)  # TD-CLM factored: row, then col


class LuminaVCase:
    """A prebuilt descriptor for one variant at one N."""

    def __init__(self, variant: str, n: int, backend: str, buffers: Buffers | None = None):
        self.variant = variant
        tdclm = variant.startswith("tdclm")
        check_finite = not variant.endswith("_nocheck")
        bf16 = "bf16" in variant
        b = buffers or Buffers(n)
        self.buffers = b
        param, grad = (b.x16, b.g16) if bf16 else (b.x32, b.g32)
        dtype = _native.DTYPE_BF16 if bf16 else _native.DTYPE_F32
        second = b.factors if "factored" in variant else b.s if tdclm else b.v
        args = [param.data_ptr(), grad.data_ptr(), b.m.data_ptr(), second.data_ptr(),
                b.master.data_ptr() if bf16 else 0, n, 0, 12345, dtype, dtype]
        if "factored" in variant:  # rows and td_factor (builds before issue 14 have neither)
            args += [factored_rows(n), _native.TD_FACTORED]
        self.desc = _native.TensorDesc(*args)
        self.hp = _native.Hyperparams()
        self.hp.buffer_mode = 1 if tdclm else 2
        self.hp.step = 0
        self.hp.check_finite = int(check_finite)
        self.options = _native.RunOptions(backend)

    def step(self) -> None:
        self.hp.step += 1
        status = _native.step_multi(self.hp, [self.desc], self.options)
        code = status[0] if isinstance(status, tuple) else status
        if code != 0:
            raise RuntimeError(f"luminav step failed: {status}")


def gpt_like_shapes() -> list[int]:
    """Element counts of a small GPT-like model: 12 blocks of width 256 (attention
    and MLP weights, biases, norms) and a 8192 x 256 embedding; 147 tensors."""
    d = 256
    block = [3 * d * d, 3 * d, d * d, d, 4 * d * d, 4 * d, 4 * d * d, d, d, d, d, d]
    return [8192 * d] + block * 12 + [d, d]


def multi_tensor(repeats: int, min_time: float) -> dict:
    """One step over the GPT-like list: one native call for all tensors, one call per
    tensor (each with the finite check, and without), and torch's fused and foreach
    AdamW over the same list. (With the check, one call checks every tensor before it
    writes any: the whole call is all-or-nothing, which per-tensor calls are not.)"""
    shapes = gpt_like_shapes()
    cases = [LuminaVCase("clm_f32", n, "simd") for n in shapes]
    descs = [c.desc for c in cases]
    options = cases[0].options
    checked = cases[0].hp
    unchecked = _native.Hyperparams()
    unchecked.buffer_mode, unchecked.step, unchecked.check_finite = 2, 0, 0

    def one_call(hp):
        def run():
            hp.step += 1
            _native.step_multi(hp, descs, options)
        return run

    def per_tensor(hp):
        def run():
            hp.step += 1
            for d in descs:
                _native.step_multi(hp, [d], options)
        return run

    runs = {"simd_one_call": one_call(checked), "simd_call_per_tensor": per_tensor(checked),
            "simd_one_call_nocheck": one_call(unchecked),
            "simd_call_per_tensor_nocheck": per_tensor(unchecked)}
    keep = []
    for mode in ("fused", "foreach"):
        params = [torch.nn.Parameter(torch.randn(n)) for n in shapes]
        for q in params:
            q.grad = torch.randn_like(q) * 1e-2
        kwargs = {"fused": True} if mode == "fused" else {"foreach": True}
        opt = torch.optim.AdamW(params, lr=1e-3, **kwargs)
        keep.append(opt)
        runs[f"torch_{mode}"] = opt.step
    samples = {k: t.samples for k, t in measure_side_by_side(runs, repeats, min_time=min_time).items()}
    total = sum(shapes)
    out = {"tensors": len(shapes), "elements": total}
    out.update({k: total / statistics.median(v) for k, v in samples.items()})
    return out


# torch's cases, in table order: fused and foreach AdamW, and fused AdamW behind
# GradScaler's finite check (the guarantee our default step gives).
TORCH_CASES = ("torch_fused", "torch_foreach", "torch_fused_checked")


def torch_case(buffers: Buffers, mode: str):
    """torch.optim.AdamW over the shared fp32 parameter and gradient."""
    p = torch.nn.Parameter(buffers.x32, requires_grad=True)
    p.grad = buffers.g32
    kwargs = {"fused": True} if mode == "fused" else {"foreach": True}
    return torch.optim.AdamW([p], lr=1e-3, **kwargs)


def torch_checked_step(opt: torch.optim.Optimizer, grads: list[torch.Tensor]):
    """torch's own way to the guarantee our finite check gives: GradScaler's check
    (torch._amp_foreach_non_finite_check_and_unscale_, at scale 1) and a fused step
    that is skipped when it found a NaN/Inf (the found_inf GradScaler hands it)."""
    found_inf, inv_scale = torch.zeros(()), torch.ones(())

    def step() -> None:
        found_inf.zero_()
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        opt.found_inf = found_inf
        try:
            opt.step()
        finally:
            opt.found_inf = None
    return step


def machine() -> str:
    return f"{harness.machine()}, {torch.get_num_threads()} torch threads"


def report(rows: list[dict], bw: dict, variants: list[str], spread: dict | None = None) -> None:
    """Markdown tables: elements/s side by side, then the targets' ratios."""
    floor_bw = max(bw.values()) * 1e9
    cols = [f"simd_{v}" for v in variants] + [c for c in TORCH_CASES if c in rows[0]]
    cols += [c for c in (f"scalar_{v}" for v in variants) if c in rows[0]]
    print()
    print("Elements per second (millions), median:")
    print()
    print("| N | " + " | ".join(c.replace("_", " ") for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for row in rows:
        cells = [f"2^{row['log2_n']}"]
        for c in cols:
            cell = f"{row[c] / 1e6:.0f}"
            if spread and c in spread.get(row["log2_n"], {}):
                lo, hi = spread[row["log2_n"]][c]
                cell += f" ({lo / 1e6:.0f}-{hi / 1e6:.0f})"
            cells.append(cell)
        print("| " + " | ".join(cells) + " |")
    print()
    print(f"Floors at {floor_bw / 1e9:.1f} GB/s: " + ", ".join(
        f"{v} {floor_bw / BYTES_PER_ELEMENT[v] / 1e6:.0f} M/s ({BYTES_PER_ELEMENT[v]} B)" for v in variants))
    print()
    ratios = [("CLM f32 / torch fused", "simd_clm_f32", "torch_fused"),
              ("CLM f32 no check / torch fused", "simd_clm_f32_nocheck", "torch_fused"),
              ("CLM f32 / torch fused with GradScaler's check", "simd_clm_f32", "torch_fused_checked"),
              ("TD-CLM / CLM f32 (bytes 32/24 = 1.33)", "simd_tdclm_f32", "simd_clm_f32"),
              ("TD-CLM factored / CLM f32", "simd_tdclm_factored_f32", "simd_clm_f32"),
              ("TD-CLM factored f32 / torch fused", "simd_tdclm_factored_f32", "torch_fused"),
              ("TD-CLM / CLM bf16+master (bytes 30/22 = 1.36)", "simd_tdclm_bf16_master",
               "simd_clm_bf16_master")]
    ratios = [r for r in ratios if r[1] in rows[0] and r[2] in rows[0]]
    floors = [v for v in variants if f"simd_{v}" in rows[0]]
    print("| N | " + " | ".join(r[0] for r in ratios) + " | "
          + " | ".join(f"{v} % of floor" for v in floors) + " |")
    print("|---" * (len(ratios) + len(floors) + 1) + "|")
    for row in rows:
        cells = [f"2^{row['log2_n']}"] + [f"{row[a] / row[b]:.2f}" for _, a, b in ratios]
        cells += [f"{100 * row[f'simd_{v}'] * BYTES_PER_ELEMENT[v] / floor_bw:.0f}%" for v in floors]
        print("| " + " | ".join(cells) + " |")


def combine(paths: list[str]) -> int:
    """Medians (and min-max) over several runs' JSON files."""
    runs = [json.load(open(p)) for p in paths]
    bw = {k: statistics.median(r["copy_bandwidth"][k] for r in runs) for k in runs[0]["copy_bandwidth"]}
    print(f"# {len(runs)} runs; {runs[0]['machine']}")
    print("# bandwidth medians (read + write, GB/s): "
          + ", ".join(f"{k} {v:.2f} (" + "/".join(f"{r['copy_bandwidth'][k]:.1f}" for r in runs) + ")"
                      for k, v in bw.items()))
    rows, spread = [], {}
    for i, row in enumerate(runs[0]["rows"]):
        merged = {"log2_n": row["log2_n"], "n": row["n"]}
        spread[row["log2_n"]] = {}
        for k, v in row.items():
            if isinstance(v, float):
                values = [r["rows"][i][k] for r in runs]
                merged[k] = statistics.median(values)
                spread[row["log2_n"]][k] = (min(values), max(values))
        rows.append(merged)
    variants = [k[len("simd_"):] for k in runs[0]["rows"][0] if k.startswith("simd_") and k != "simd_target"]
    report(rows, bw, variants, spread)
    multis = [r["multi_tensor"] for r in runs if r.get("multi_tensor")]
    if multis:
        print()
        print(f"GPT-like list, {multis[0]['tensors']} tensors, {multis[0]['elements']} elements, CLM f32, "
              "M elements/s, median (min-max): " + ", ".join(
                  f"{k} {statistics.median(m[k] for m in multis) / 1e6:.0f} "
                  f"({min(m[k] for m in multis) / 1e6:.0f}-{max(m[k] for m in multis) / 1e6:.0f})"
                  for k, v in multis[0].items() if isinstance(v, float)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lo", type=int, default=16, help="smallest N = 2^lo")
    ap.add_argument("--hi", type=int, default=27, help="largest N = 2^hi")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per timing")
    ap.add_argument("--no-scalar", action="store_true", help="skip the scalar backend")
    ap.add_argument("--variants",
                    default="clm_f32,clm_f32_nocheck,tdclm_f32,clm_bf16_master,tdclm_bf16_master")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--combine", nargs="+", metavar="JSON", help="only print medians over earlier runs")
    ap.add_argument("--no-list", action="store_true", help="skip the GPT-like multi-tensor step")
    args = ap.parse_args()
    if args.combine:
        return combine(args.combine)

    variants = args.variants.split(",")
    bw = copy_bandwidth(args.repeats)
    floor_bw = max(bw.values()) * 1e9
    print(f"# {machine()}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"{_native.last_backend() or 'simd'}")
    print(f"# bandwidth (read + write): torch copy_ {bw['torch_copy_GBps']:.2f} GB/s, "
          f"numpy memcpy {bw['numpy_memcpy_GBps']:.2f} GB/s, "
          f"torch in-place {bw['torch_inplace_GBps']:.2f} GB/s; floor uses the largest")
    rows = []
    for e in range(args.lo, args.hi + 1):
        n = 1 << e
        buffers = Buffers(n)
        anchors = {mode: torch_case(buffers, mode) for mode in ("fused", "foreach")}
        # The same memory for both sides: our m and v are torch fused AdamW's own
        # exp_avg and exp_avg_sq (created by one step), so where the pages of
        # separately allocated buffers happen to lie cannot favour either side
        # (one single-thread comparison at 2^26 moved by 15% with it).
        anchors["fused"].step()
        state = next(iter(anchors["fused"].state.values()))
        buffers.m, buffers.v = state["exp_avg"], state["exp_avg_sq"]
        runs = {}
        for variant in variants:
            runs[f"simd_{variant}"] = LuminaVCase(variant, n, "simd", buffers).step
            if not args.no_scalar:
                runs[f"scalar_{variant}"] = LuminaVCase(variant, n, "scalar", buffers).step
        for mode, opt in anchors.items():
            runs[f"torch_{mode}"] = opt.step
        runs["torch_fused_checked"] = torch_checked_step(anchors["fused"], [buffers.g32])
        # Round-robin (harness.measure_side_by_side): a change in the machine's
        # load hits every case alike; the medians are compared.
        samples = {k: t.samples for k, t in
                   measure_side_by_side(runs, args.repeats, min_time=args.min_time).items()}
        row = {"log2_n": e, "n": n}
        row.update({k: n / statistics.median(v) for k, v in samples.items()})
        runs["simd_clm_f32" if "clm_f32" in variants else next(iter(runs))]()
        row["simd_target"] = _native.last_backend()
        del runs, buffers, anchors, state
        rows.append(row)
        cells = " ".join(f"{k}={v / 1e6:.0f}M/s" for k, v in row.items() if isinstance(v, float))
        print(f"N=2^{e}: {cells}", flush=True)

    report(rows, bw, variants)
    multi = None
    if not args.no_list:
        multi = multi_tensor(args.repeats, args.min_time)
        print()
        print(f"GPT-like list, {multi['tensors']} tensors, {multi['elements']} elements, CLM f32 "
              "(M elements/s): " + ", ".join(f"{k} {v / 1e6:.0f}" for k, v in multi.items()
                                              if isinstance(v, float)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "copy_bandwidth": bw, "bytes_per_element": BYTES_PER_ELEMENT,
                       "rows": rows, "multi_tensor": multi, "argv": sys.argv,
                       "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
