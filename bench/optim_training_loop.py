"""LuminaV against torch's AdamW in a user's training loop (issue 13).

A Llama-style model (transformers LlamaForCausalLM from a config, random init,
synthetic tokens made here, bf16 autocast on the GPU), side by side in one run:
torch.optim.AdamW(fused=True), the same with capturable=True, and LuminaV
(CLM, default finite check). For each: the GPU time of opt.step() (CUDA events
around the call), its host time while the GPU still has ~100 ms of queued work,
the whole training step at batch 16 and batch 2 (zero_grad(set_to_none=True),
forward, backward, step; no per-step sync), and the same with opt.step()
captured in a CUDA graph. Also LuminaV with two groups (TD-CLM body, CLM output
layer), issue 14's peers (adam_mini, adamw8bit: Adam-mini and torchao's AdamW8bit, their wheels
carried as bench/gpu_suite.sh's EVIDENCE_WHEELS says), and the bytes floor of the step (32 B per parameter over the copy
bandwidth measured in the same run). Every kind is set up at once and measured
round-robin (--rounds, the order rotated each round); the JSON keeps every
sample and the per-round ratios LuminaV / torch fused.

On the CPU (--device cpu) a small model of the same family, and the front end's
cost per parameter (a model of many tiny tensors, where the arithmetic is nil).

  python bench/optim_training_loop.py --json out.json            # GPU
  python bench/optim_training_loop.py --device cpu --json out.json
  python bench/optim_training_loop.py --device cpu --cpu-model llama27m \
      --kinds torch_fused luminav_tdclm luminav_tdclm_cautious luminav_cautious
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from luminamoon.optim import LuminaV

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import cuda_event_median  # noqa: E402
from llama_model import llama  # noqa: E402,F401 (the other bench scripts import it from here too)


# the hyperparameters every optimizer of the loop shares (a GPT-2-style recipe)
HYPER = dict(lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)


def make_optimizer(kind, model):
    if kind == "torch_fused":
        return torch.optim.AdamW(model.parameters(), **HYPER, fused=True)
    if kind == "torch_fused_capturable":
        return torch.optim.AdamW(model.parameters(), **dict(HYPER, lr=torch.tensor(HYPER["lr"], device="cuda")),
                                 fused=True, capturable=True)
    if kind == "torch_foreach":
        return torch.optim.AdamW(model.parameters(), **HYPER, foreach=True)
    if kind in ("luminav", "luminav_eager_launches", "luminav_recorded"):
        return LuminaV(model.parameters(), **HYPER)
    if kind == "luminav_unchecked":  # torch's semantics: no finite check, so no pass 1 (CLM)
        return LuminaV(model.parameters(), **HYPER, check_finite=False)
    if kind == "luminav_tdclm":  # TD-CLM v2 (factored) on every tensor
        return LuminaV(model.parameters(), **HYPER, mode="tdclm")
    if kind == "luminav_tdclm_tau0.5":  # the same with the soft clip the README suggests (row T3f)
        return LuminaV(model.parameters(), **HYPER, mode="tdclm", tau=0.5)
    if kind == "luminav_tdclm_cautious":  # the spec's cautious mask: one more reduction per tensor (row T3k)
        return LuminaV(model.parameters(), **HYPER, mode="tdclm", cautious=True)
    if kind == "luminav_cautious":  # AdamW's update with the cautious mask (CLM, row T7f)
        return LuminaV(model.parameters(), **HYPER, cautious=True)
    if kind == "luminav_tdclm_rms":  # the same with the RMS clip (bound="rms", beyond the spec): one more pass
        return LuminaV(model.parameters(), **HYPER, mode="tdclm", bound="rms", bound_ratio=1.0)
    if kind in ("luminav_triton", "luminav_tdclm_triton", "luminav_triton_aot", "luminav_tdclm_triton_aot"):
        # issue 18: the Triton JIT kernels, and the Triton AOT kernels (built on the CPU) run from C
        return LuminaV(model.parameters(), **HYPER, mode="tdclm" if "tdclm" in kind else "clm",
                       backend="triton-aot" if kind.endswith("_aot") else "triton")
    if kind in ("adam_mini", "adamw8bit"):  # issue 14's peers, built as the quality runs build them
        from optim_llama_quality import make
        return make(kind, model, HYPER["lr"])
    if kind == "luminav_two_groups":
        head = [p for n, p in model.named_parameters() if n.startswith("lm_head")]
        body = [p for n, p in model.named_parameters() if not n.startswith("lm_head")]
        return LuminaV([{"params": body, "mode": "tdclm"}, {"params": head, "mode": "clm"}], **HYPER)
    raise ValueError(kind)


# Kinds that are another kind under an environment set while they are measured:
# luminav_eager_launches is luminav without the cached step graph (Note [cached
# step graph] in src/optim/cuda/step_graph_cache.h), every kernel launched eagerly;
# luminav_recorded records every step, a step seen before too (Note [a step seen before]).
KIND_ENV = {"luminav_eager_launches": {"LUMINAV_CUDA_GRAPHS": "0"}, "luminav_recorded": {"LUMINAV_CUDA_STEP_AGAIN": "0"}}


@contextlib.contextmanager
def kind_env(kind):
    saved = {k: os.environ.get(k) for k in KIND_ENV.get(kind, {})}
    os.environ.update(KIND_ENV.get(kind, {}))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Loop:
    """One model, one optimizer, synthetic batches; the pieces of a training step."""

    def __init__(self, model, opt, batch, seq, vocab, device):
        self.model, self.opt, self.device = model, opt, device
        gen = torch.Generator(device="cpu").manual_seed(1)
        self.batches = [torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(device) for _ in range(4)]
        self.i = 0

    def forward_backward(self):
        tokens = self.batches[self.i % len(self.batches)]
        self.i += 1
        with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.device == "cuda"):
            logits = self.model(input_ids=tokens[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                 tokens[:, 1:].reshape(-1))
        loss.backward()

    def step(self, opt_step=None):
        self.opt.zero_grad(set_to_none=opt_step is None)
        self.forward_backward()
        (opt_step or self.opt.step)()


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def gpu_step_ms(loop, reps):
    times = []
    for _ in range(reps):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loop.opt.step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_step_ms(loop, reps, sleep_cycles):
    times = []
    for _ in range(reps):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        torch.cuda.synchronize()
        torch.cuda._sleep(sleep_cycles)  # ~100 ms of queued GPU work
        t0 = time.perf_counter()
        loop.opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    return statistics.median(times)


def whole_step_ms(loop, steps, windows=3, opt_step=None):
    """Median over windows of (window time / steps), no sync inside a window."""
    device = loop.device
    out = []
    for _ in range(windows):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            loop.step(opt_step)
        sync(device)
        out.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(out)


def graphed_step(opt):
    """opt.step() captured in a CUDA graph (gradients must then stay where they are)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        opt.step()  # warm-up: state and workspaces exist before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    return graph.replay


def copy_bandwidth_gbs():
    n = 1 << 28  # 1 GiB of fp32
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return 2 * 4 * n / (statistics.median(times) * 1e-3) / 1e9


def paired_ratio_ci(ratios, resamples=2000, seed=0):
    """Median of paired ratios and its 95% percentile-bootstrap interval (fixed seed: reproducible)."""
    import random
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return statistics.median(ratios), meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def paired_whole_steps(setups, ours, anchor, windows, steps):
    """Whole training steps, ours and the anchor in adjacent windows (ABBA order, so that a drift
    of the machine within a pair falls on both alike): one ratio per pair of windows, many short
    pairs instead of a few long rounds. The loop is host-bound on the H200 (~50 ms a step at
    either batch size), where LuminaV's ~0.8 ms less host time per step is ~1.5% and the
    round-robin rounds' spread (0.72-1.28) hides it."""
    out = {}
    for batch, index in (("b16", 1), ("b2", 2)):
        times = {ours: [], anchor: []}
        for w in range(windows):
            for kind in ((ours, anchor) if w % 2 == 0 else (anchor, ours)):
                with kind_env(kind):
                    times[kind].append(whole_step_ms(setups[kind][index], steps, windows=1))
        ratios = [a / b for a, b in zip(times[ours], times[anchor])]
        median, lo, hi = paired_ratio_ci(ratios)
        out[batch] = {"ours_ms": statistics.median(times[ours]), "anchor_ms": statistics.median(times[anchor]),
                      "ratio_median": median, "ratio_ci95": [lo, hi], "ratios": ratios,
                      "ours_faster_pairs": sum(r < 1 for r in ratios), "pairs": len(ratios)}
        print(f"paired whole step {batch}: {ours} {out[batch]['ours_ms']:.3f} ms, {anchor} "
              f"{out[batch]['anchor_ms']:.3f} ms, ratio {median:.4f} (95% CI {lo:.4f}-{hi:.4f}), "
              f"{ours} faster in {out[batch]['ours_faster_pairs']} of {len(ratios)} pairs", flush=True)
    return out


# --param-dtype bf16: the model's parameters (and so its gradients) in bf16; LuminaV keeps fp32
# masters for them, torch's AdamW steps the bf16 values (the TD-CLM factor tiles of 16-bit gradients).
PARAM_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
GRAPH_KINDS = ("torch_fused_capturable", "luminav", "luminav_tdclm", "luminav_tdclm_tau0.5", "luminav_tdclm_cautious",
               "luminav_two_groups", "luminav_triton", "luminav_tdclm_triton", "luminav_triton_aot",
               "luminav_tdclm_triton_aot")


def run_gpu(args):
    """Every kind set up at once, then measured round-robin (the order rotated each round), so that
    the machine's drift falls on every kind alike; medians over rounds, and per-round ratios."""
    cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
    result = {"machine": torch.cuda.get_device_name(), "torch": torch.__version__, "config": cfg, "rows": {},
              "rounds": args.rounds, "samples": {}}
    bw = copy_bandwidth_gbs()
    props = torch.cuda.get_device_properties(0)
    sleep_cycles = int(0.1 * props.clock_rate * 1e3) if hasattr(props, "clock_rate") else int(0.1 * 1.98e9)
    setups = {}
    for kind in args.kinds:
        model = llama("cuda", **cfg).to(PARAM_DTYPES[args.param_dtype])
        result.update(param_dtype=args.param_dtype, params=sum(p.numel() for p in model.parameters()),
                      tensors=sum(1 for _ in model.parameters()), copy_gbs=bw)
        result["floor_ms"] = 32 * result["params"] / (bw * 1e9) * 1e3
        opt = make_optimizer(kind, model)
        loop16 = Loop(model, opt, 16, cfg["seq"], cfg["vocab"], "cuda")
        loop2 = Loop(model, opt, 2, cfg["seq"], cfg["vocab"], "cuda")
        for _ in range(3):
            loop16.step()
        setups[kind] = (opt, loop16, loop2)
    sync("cuda")
    samples = {kind: {} for kind in args.kinds}

    def add(kind, key, value):
        samples[kind].setdefault(key, []).append(value)

    kinds = list(args.kinds)
    per_round = max(1, args.reps // args.rounds)
    for r in range(args.rounds):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            opt, loop16, loop2 = setups[kind]
            with kind_env(kind):
                add(kind, "gpu_step_ms", gpu_step_ms(loop16, per_round))
                add(kind, "host_step_ms", host_step_ms(loop16, 2, sleep_cycles))
                add(kind, "whole_b16_ms", whole_step_ms(loop16, args.steps, windows=1))
                add(kind, "whole_b2_ms", whole_step_ms(loop2, args.steps, windows=1))
    if args.paired_windows and "torch_fused" in setups and "luminav" in setups:
        result["paired_whole_step"] = paired_whole_steps(setups, "luminav", "torch_fused",
                                                         args.paired_windows, args.paired_steps)
    replays = {}
    for kind in kinds:
        if kind not in GRAPH_KINDS:
            continue
        opt, loop16, _ = setups[kind]
        try:
            opt.zero_grad(set_to_none=False)
            loop16.forward_backward()
            replays[kind] = graphed_step(opt)
        except Exception as exc:  # report, do not hide
            samples[kind]["graph_error"] = f"{type(exc).__name__}: {exc}"
    for r in range(args.rounds):
        for kind in [k for k in kinds if k in replays]:
            _, loop16, loop2 = setups[kind]
            replay = replays[kind]
            add(kind, "graph_gpu_step_ms", cuda_event_median(replay, 1, per_round)[0])
            add(kind, "graph_whole_b16_ms", whole_step_ms(loop16, args.steps, windows=1, opt_step=replay))
            add(kind, "graph_whole_b2_ms", whole_step_ms(loop2, args.steps, windows=1, opt_step=replay))
    for kind in kinds:
        row = {k: (statistics.median(v) if isinstance(v, list) else v) for k, v in samples[kind].items()}
        result["rows"][kind] = row
        result["samples"][kind] = samples[kind]
        print(kind, json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    if "torch_fused" in samples and "luminav" in samples:
        result["ratios_per_round"] = {
            key: [a / b for a, b in zip(samples["luminav"][key], samples["torch_fused"][key])]
            for key in ("gpu_step_ms", "host_step_ms", "whole_b16_ms", "whole_b2_ms")}
    return result


# The CPU models (config, batch): "small" (1 M parameters, the front end's share is large) and "llama27m"
# (27.5 M parameters in 111 tensors, 12 layers of width 384, batch 16 x 64: the user's loop of rows T2k, T2m).
CPU_MODELS = {"small": (dict(hidden=128, layers=2, heads=4, mlp=256, vocab=1024, seq=64), 4),
              "llama27m": (dict(hidden=384, layers=12, heads=6, mlp=1024, vocab=8192, seq=64), 16)}
CPU_KINDS = ("torch_foreach", "torch_fused", "luminav")


def run_cpu(args):
    """Every kind's model set up at once and stepped in turn, step by step (so that a slow spell of the
    machine falls on every kind alike): medians of opt.step() and of the whole step over --reps steps."""
    torch.set_num_threads(2)
    cfg, batch = CPU_MODELS[args.cpu_model]
    kinds = args.kinds or CPU_KINDS
    result = {"machine": platform.processor() or platform.machine(), "torch": torch.__version__, "config": cfg,
              "batch": batch, "rows": {}}
    loops = {}
    for kind in kinds:
        model = llama("cpu", **cfg)
        loops[kind] = Loop(model, make_optimizer(kind, model), batch, cfg["seq"], cfg["vocab"], "cpu")
    times = {kind: {"opt_step_ms": [], "whole_step_ms": []} for kind in kinds}
    for rep in range(args.reps + 3):  # 3 warm-up steps each
        for kind, loop in loops.items():
            t0 = time.perf_counter()
            loop.opt.zero_grad(set_to_none=True)
            loop.forward_backward()
            t1 = time.perf_counter()
            loop.opt.step()
            t2 = time.perf_counter()
            if rep >= 3:
                times[kind]["opt_step_ms"].append((t2 - t1) * 1e3)
                times[kind]["whole_step_ms"].append((t2 - t0) * 1e3)
    for kind in kinds:
        result["rows"][kind] = {key: statistics.median(v) for key, v in times[kind].items()}
        print(kind, {key: round(v, 3) for key, v in result["rows"][kind].items()}, flush=True)
    # The front end alone: many tiny tensors, zero_grad(set_to_none=True) every step.
    count = 1000
    for kind in CPU_KINDS:
        ps = [torch.nn.Parameter(torch.randn(4)) for _ in range(count)]
        opt = (LuminaV(ps, lr=1e-3) if kind == "luminav" else
               torch.optim.AdamW(ps, lr=1e-3, **({"fused": True} if kind == "torch_fused" else {"foreach": True})))
        t = []
        for i in range(args.reps + 3):
            for p in ps:
                p.grad = torch.full_like(p, 0.01)
            t0 = time.perf_counter()
            opt.step()
            t.append((time.perf_counter() - t0) * 1e6 / count)
        result["rows"][f"{kind}_us_per_param"] = statistics.median(t[3:])
        print(kind, "us per parameter", round(result["rows"][f"{kind}_us_per_param"], 3), flush=True)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--kinds", nargs="*", help="GPU default: torch_fused torch_fused_capturable luminav luminav_tdclm "
                    "luminav_two_groups; CPU default: " + " ".join(CPU_KINDS))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5, help="round-robin rounds over the kinds (GPU)")
    ap.add_argument("--paired-windows", type=int, default=0,
                    help="GPU: pairs of adjacent whole-step windows, LuminaV against torch fused (row L3)")
    ap.add_argument("--paired-steps", type=int, default=5, help="steps per paired window")
    ap.add_argument("--param-dtype", choices=tuple(PARAM_DTYPES), default="fp32", help="GPU: the parameters' dtype")
    ap.add_argument("--cpu-model", choices=tuple(CPU_MODELS), default="small")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.device == "cuda" and not args.kinds:
        args.kinds = ["torch_fused", "torch_fused_capturable", "luminav", "luminav_tdclm", "luminav_two_groups"]
    result = run_gpu(args) if args.device == "cuda" else run_cpu(args)
    if args.device == "cuda":
        ref = result["rows"].get("torch_fused", {})
        ours = result["rows"].get("luminav", {})
        for key in ("gpu_step_ms", "host_step_ms", "whole_b16_ms", "whole_b2_ms"):
            if key in ref and key in ours:
                per_round = result.get("ratios_per_round", {}).get(key, [])
                print(f"{key:16s} torch fused {ref[key]:8.3f}  luminav {ours[key]:8.3f}  ratio {ours[key] / ref[key]:.3f}"
                      f"  per-round median {statistics.median(per_round):.3f} "
                      f"({min(per_round):.3f}-{max(per_round):.3f})" if per_round else "")
        print(f"floor {result['floor_ms']:.3f} ms (32 B/param at {result['copy_gbs']:.0f} GB/s copy)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
