"""How closely TD-CLM v2's factored second moment follows the per-element one (AdamW's) along a
training run, tensor group by tensor group (issue 14: why a seed leaves the loss plateau late).

Trains a reduced Llama of bench/optim_llama_quality.py on its bigram chain with the plain-torch
TD-CLM reference (bench/tdclm_torch_reference.py) or torch AdamW, the issue's lr, betas, weight
decay and warm-up, and keeps beside the run, from the same gradients and with the same betas, the
first moment m and both second moments: the per-element moving average v of g^2 and the factored
vhat (the row and column means of g^2). At the chosen steps it reports, per group of tensors:
- step ratio: ||m / (sqrt(vhat) + eps)|| / ||m / (sqrt(v) + eps)||, both bias-corrected: how large the
  step the factored moment gives is against AdamW's for the same history (above 1: vhat
  underestimates v where m is, the step is larger; below 1: smaller);
- sqrt(v / vhat) element by element, its 10th, 50th and 90th percentiles.

  python bench/tdclm_factor_fit.py --optimizer tdclm --seeds 0 1 2 --steps 300 --json out.json
"""
from __future__ import annotations

import argparse
import json
import re
import time

import torch

from optim_llama_quality import LLAMA_98M, bigram_batches, chain, loss_of, write_json
from optim_training_loop import llama
from tdclm_torch_reference import TDCLMReference, as_rows, factored_second_moment, update_factors

GROUPS = (("embedding", r"embed_tokens"), ("lm_head", r"lm_head"), ("q, k", r"\.(q|k)_proj"),
          ("v, o", r"\.(v|o)_proj"), ("mlp", r"\.mlp\."), ("norms (1-D)", r"norm"))
REDUCED = dict(hidden=128, layers=2, heads=4, mlp=344, vocab=LLAMA_98M["vocab"], seq=64, batch=8)
LR, BETAS, WD, EPS, WARMUP = 1e-3, (0.9, 0.95), 0.1, 1e-8, 50


def group_of(name):
    return next(g for g, pattern in GROUPS if re.search(pattern, name))


class Shadow:
    """m, v and the factors of one tensor, from its gradients."""

    def __init__(self, p):
        g = as_rows(p)
        self.m, self.v = torch.zeros_like(g), torch.zeros_like(g)
        self.row = torch.zeros(g.shape[0])
        self.col = torch.zeros(g.shape[1]) if g.shape[1] > 1 else None

    def update(self, grad):
        g = as_rows(grad)
        self.m.mul_(BETAS[0]).add_(g, alpha=1 - BETAS[0])
        self.v.mul_(BETAS[1]).addcmul_(g, g, value=1 - BETAS[1])
        update_factors(self.row, self.col, g, BETAS[1])


def fit(shadows, t):
    """Per group: the step ratio and percentiles of sqrt(v / vhat) at step t."""
    bc1, bc2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t
    out = {}
    for group, _ in GROUPS:
        members = [s for name, s in shadows.items() if group_of(name) == group]
        if not members:
            continue
        num = den = 0.0
        ratios = []
        for s in members:
            vhat = factored_second_moment(s.row, s.col).expand_as(s.v)
            m = s.m / bc1
            num += float(((m / ((vhat / bc2).sqrt() + EPS)) ** 2).sum())
            den += float(((m / ((s.v / bc2).sqrt() + EPS)) ** 2).sum())
            both = (vhat > 0) & (s.v > 0)
            ratios.append((s.v[both] / vhat[both]).sqrt())
        r = torch.cat(ratios)
        r = r[torch.randperm(len(r), generator=torch.Generator().manual_seed(0))[:1 << 20]]  # quantile's size limit
        q = torch.quantile(r, torch.tensor([0.1, 0.5, 0.9])).tolist()
        out[group] = {"step_ratio": (num / den) ** 0.5 if den > 0 else None, "p10": q[0], "p50": q[1], "p90": q[2]}
    return out


def run(optimizer, seed, steps, report_at, cfg):
    model = llama("cpu", **{k: v for k, v in cfg.items() if k != "batch"}, init_seed=seed)
    kw = dict(lr=LR, betas=BETAS, weight_decay=WD)
    opt = TDCLMReference(model.parameters(), **kw) if optimizer == "tdclm" else torch.optim.AdamW(
        model.parameters(), **kw)
    successors, weights = chain(123, cfg["vocab"], "cpu")  # optim_llama_quality.py's chain (data seed 123)
    data = bigram_batches(successors, weights, torch.Generator().manual_seed(124 + seed), steps,
                          cfg["batch"], cfg["seq"])
    shadows = {name: Shadow(p) for name, p in model.named_parameters()}
    curve, fits = [], {}
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = LR * min(1.0, (step + 1) / WARMUP)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, data[step])
        loss.backward()
        with torch.no_grad():
            for name, p in model.named_parameters():
                shadows[name].update(p.grad)
        opt.step()
        curve.append(float(loss.detach()))
        if step + 1 in report_at:
            fits[step + 1] = fit(shadows, step + 1)
    return {"curve": curve[::10], "first_step_below_3": next((i for i, x in enumerate(curve) if x < 3.0), None),
            "fit": fits}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--optimizer", choices=("tdclm", "adamw"), default="tdclm")
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--report-at", type=int, nargs="*", default=[10, 50, 100, 200, 300])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=None, help="JSON overriding the reduced model, e.g. '{\"hidden\": 256}'")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = dict(REDUCED, **json.loads(args.model or "{}"))
    out = {"optimizer": args.optimizer, "model": cfg, "lr": LR, "betas": BETAS, "runs": {}}
    for seed in args.seeds:
        t0 = time.time()
        r = out["runs"][f"seed{seed}"] = run(args.optimizer, seed, args.steps, set(args.report_at), cfg)
        print(f"{args.optimizer} seed {seed}: loss {r['curve'][0]:.3f} -> {r['curve'][-1]:.3f}, first below 3.0 "
              f"at step {r['first_step_below_3']} ({time.time() - t0:.0f} s)", flush=True)
        for t, groups in r["fit"].items():
            print(f"  step {t:4d}: " + "; ".join(f"{g} {f['step_ratio']:.2f} [{f['p10']:.2f} {f['p50']:.2f} "
                                                 f"{f['p90']:.2f}]" for g, f in groups.items()), flush=True)
        if args.json:
            write_json(args.json, out)


if __name__ == "__main__":
    main()
