"""Training quality of LuminaV on a ~100M Llama-style model (issue 14), fresh batches.

Synthetic tokens with learnable structure: a fixed random bigram chain (each token has a few likely
successors), a new batch every step (the same sequence for every optimizer), held-out batches from
the same chain at the end. Side by side in one run: torch AdamW (fused), LuminaV CLM, LuminaV TD-CLM
v2 (factored, every tensor). Reports the final training loss (mean of the last 20 steps), the
held-out loss, state bytes per parameter measured from the state tensors, and the step time.

  python bench/optim_llama_quality.py --steps 400 --seeds 0 --json out.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from luminamoon.optim import LuminaV
from optim_training_loop import llama
from tdclm_torch_reference import TDCLMReference

VOCAB, SEQ, BATCH = 8192, 512, 16


def chain(seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    successors = torch.randint(0, VOCAB, (VOCAB, 4), device="cuda", generator=gen)
    weights = torch.tensor([0.55, 0.25, 0.12, 0.08], device="cuda")
    return successors, weights, gen


def batch(successors, weights, gen):
    tokens = torch.empty(BATCH, SEQ + 1, dtype=torch.long, device="cuda")
    tokens[:, 0] = torch.randint(0, VOCAB, (BATCH,), device="cuda", generator=gen)
    picks = torch.multinomial(weights.expand(BATCH * SEQ, 4), 1, generator=gen).view(BATCH, SEQ)
    for t in range(SEQ):
        tokens[:, t + 1] = successors[tokens[:, t], picks[:, t]]
    return tokens


def loss_of(model, tokens):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(input_ids=tokens[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def make(kind, model, lr):
    kw = dict(lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    if kind == "adamw_fused":
        return torch.optim.AdamW(model.parameters(), fused=True, **kw)
    if kind == "luminav_clm":
        return LuminaV(model.parameters(), **kw)
    if kind == "luminav_tdclm":
        return LuminaV(model.parameters(), mode="tdclm", td_factor="factored", **kw)
    if kind == "reference_tdclm":  # the spec's formulas in plain torch (bench/tdclm_torch_reference.py)
        return TDCLMReference(model.parameters(), **kw)
    raise ValueError(kind)


def state_bytes_per_param(opt, model):
    n = sum(p.numel() for p in model.parameters())
    total = 0
    for state in opt.state.values():
        for key in ("exp_avg", "exp_avg_sq", "row", "col"):
            if isinstance(state.get(key), torch.Tensor):
                total += state[key].numel() * state[key].element_size()
    return total / n


def agreement(kind, anchor, steps, lr):
    """Two copies of one model trained on the same batches by `kind` and by `anchor`:
    the largest relative difference of a parameter tensor after `steps` steps (and its name).
    CLM against AdamW is the control: what bf16 autocast alone leaves between two correct
    implementations of one update."""
    cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=VOCAB, seq=SEQ)
    models, opts = [], []
    for k in (kind, anchor):
        torch.manual_seed(0)
        models.append(llama("cuda", **cfg))
        opts.append(make(k, models[-1], lr))
    successors, weights, _ = chain(123)
    gen = torch.Generator(device="cuda").manual_seed(7)
    for _ in range(steps):
        tokens = batch(successors, weights, gen)
        for model, opt in zip(models, opts):
            opt.zero_grad(set_to_none=True)
            loss_of(model, tokens).backward()
            opt.step()
    torch.manual_seed(0)
    start = llama("cuda", **cfg)  # the common initial weights
    worst = (0.0, "")
    with torch.no_grad():
        for (name, a), b, a0 in zip(models[0].named_parameters(), models[1].parameters(), start.parameters()):
            # relative to how far the anchor moved the tensor: 1.0 would mean unrelated updates
            diff = float((a - b).norm() / (b - a0).norm().clamp_min(1e-30))
            worst = max(worst, (diff, name))
    return {"max_relative_difference_of_the_update": worst[0], "tensor": worst[1], "steps": steps}


def run(kind, seed, steps, lr, data_seed):
    cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=VOCAB, seq=SEQ)
    torch.manual_seed(seed)
    model = llama("cuda", **cfg)
    opt = make(kind, model, lr)
    successors, weights, _ = chain(data_seed)
    gen = torch.Generator(device="cuda").manual_seed(data_seed + 1)
    held = [batch(successors, weights, torch.Generator(device="cuda").manual_seed(10_000 + i)) for i in range(4)]
    losses, times = [], []
    for step in range(steps):
        warm = min(1.0, (step + 1) / 50)
        for g in opt.param_groups:
            g["lr"] = lr * warm
        tokens = batch(successors, weights, gen)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, tokens)
        loss.backward()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.step()
        end.record()
        losses.append(loss.detach())
        if step >= 10:
            times.append((start, end))
    torch.cuda.synchronize()
    with torch.no_grad():
        held_loss = statistics.mean(float(loss_of(model, t)) for t in held)
    curve = [float(x) for x in losses]
    return {"final_train": statistics.mean(curve[-20:]), "held_out": held_loss,
            "state_bytes_per_param": state_bytes_per_param(opt, model),
            "step_ms": statistics.median(s.elapsed_time(e) for s, e in times), "curve": curve[::10]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--kinds", nargs="*", default=["adamw_fused", "luminav_clm", "luminav_tdclm"])
    ap.add_argument("--agreement-steps", type=int, default=0,
                    help="first compare luminav_tdclm with reference_tdclm (and, as the control, "
                         "luminav_clm with adamw_fused) over this many steps")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {"steps": args.steps, "lr": args.lr, "machine": torch.cuda.get_device_name(), "runs": {}}
    if args.agreement_steps:
        out["agreement"] = {f"{k}~{a}": agreement(k, a, args.agreement_steps, args.lr)
                            for k, a in (("luminav_clm", "adamw_fused"), ("luminav_tdclm", "reference_tdclm"))}
        print(json.dumps(out["agreement"], indent=1), flush=True)
    for seed in args.seeds:
        for kind in args.kinds:
            t0 = time.time()
            r = run(kind, seed, args.steps, args.lr, data_seed=123)
            out["runs"][f"{kind}/seed{seed}"] = r
            print(f"{kind:14s} seed {seed}: train {r['final_train']:.4f} held-out {r['held_out']:.4f} "
                  f"state {r['state_bytes_per_param']:.3f} B/param step {r['step_ms']:.3f} ms "
                  f"({time.time() - t0:.0f} s)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
