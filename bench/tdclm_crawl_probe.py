"""Why TD-CLM sometimes crawls out of the Llama 98M loss plateau (docs/benchmarks.md, rows T3c / T8b).

Trains with LuminaV TD-CLM (factored, the product) and, beside it on the same gradients, keeps what
AdamW would keep (m and a per-element v) and the spec's factors in plain torch. Every --every steps it
writes, per tensor, how TD-CLM's update compares with AdamW's for the same first moment:
  ratio   RMS(m_hat / sqrt(vhat)) / RMS(m_hat / sqrt(v_hat))   (< 1: TD-CLM moves the tensor less)
  q10/q50/q90  quantiles of sqrt(v / vhat) over a fixed sample of elements (< 1: that element's step
               is smaller under TD-CLM than under AdamW)
so that a crawl (loss falling ~1 nat per 40 steps where AdamW drops 3 nats in 20) can be matched with
the tensors whose steps shrink.

  python bench/tdclm_crawl_probe.py --seed 2 --steps 320 --json out.json [--kind luminav_tdclm_tau1]
"""
from __future__ import annotations

import argparse
import json

import torch

import optim_llama_quality as quality
from llama_model import llama
from tdclm_torch_reference import as_rows, factored_second_moment, update_factors

SAMPLE = 65536  # elements per tensor for the quantiles


def tensor_class(name: str) -> str:
    for key in ("embed_tokens", "lm_head", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                "down_proj"):
        if key in name:
            return key
    return "norm"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--steps", type=int, default=320)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--kind", default="luminav_tdclm", help="a TD-CLM kind of optim_llama_quality.py")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default=None, help="JSON overriding LLAMA_98M (a small CPU check)")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    dev = args.device
    cfg = dict(quality.LLAMA_98M, **json.loads(args.model or "{}"))
    data_args = argparse.Namespace(steps=args.steps, regime="fresh", data_seed=123, held_batches=1, text=False)
    train, _ = quality.make_data(data_args, cfg, args.seed, dev)
    model = llama(dev, **{k: v for k, v in cfg.items() if k != "batch"}, init_seed=args.seed)
    opt = quality.make(args.kind, model, args.lr)
    b1, b2 = opt.param_groups[0]["betas"]
    names = {p: n for n, p in model.named_parameters()}
    side = {}  # the matrices only: a 1-D tensor's TD-CLM second moment is AdamW's own
    gen = torch.Generator(device=dev).manual_seed(0)
    for p in model.parameters():
        rows = as_rows(p.detach())
        if rows.shape[1] > 1:
            side[p] = dict(m=torch.zeros_like(rows), v=torch.zeros_like(rows),
                           row=torch.zeros(rows.shape[0], device=dev), col=torch.zeros(rows.shape[1], device=dev),
                           sample=torch.randint(0, rows.numel(), (min(SAMPLE, rows.numel()),), device=dev,
                                                generator=gen))
    out = {"seed": args.seed, "kind": args.kind, "losses": [], "probes": []}
    for step in range(args.steps):
        quality.set_lr(opt, args.lr * min(1.0, (step + 1) / args.warmup))
        opt.zero_grad(set_to_none=True)
        loss = quality.loss_of(model, train[step])
        loss.backward()
        t = step + 1
        probe = step % args.every == 0
        record = {"step": step, "tensors": {}}
        with torch.no_grad():
            for p, s in side.items():
                g = as_rows(p.grad)
                s["m"].mul_(b1).add_(g, alpha=1 - b1)
                s["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                update_factors(s["row"], s["col"], g, b2)
                if not probe:
                    continue
                m_hat = s["m"] / (1 - b1 ** t)
                v_hat = s["v"] / (1 - b2 ** t)
                vhat = factored_second_moment(s["row"], s["col"]) / (1 - b2 ** t)
                u_adam = m_hat / (v_hat.sqrt() + 1e-8)
                u_td = m_hat / (vhat.sqrt() + 1e-8)
                ratio = float(u_td.square().mean().sqrt() / u_adam.square().mean().sqrt().clamp_min(1e-30))
                r = ((v_hat.flatten()[s["sample"]] + 1e-30) / (vhat.flatten()[s["sample"]] + 1e-30)).sqrt()
                q = torch.quantile(r, torch.tensor([0.1, 0.5, 0.9], device=dev)).tolist()
                record["tensors"][names[p]] = [round(ratio, 4)] + [round(x, 4) for x in q]
        opt.step()
        out["losses"].append(loss.item())
        if probe:
            record["loss"] = loss.item()
            out["probes"].append(record)
            by_class = {}
            for n, vals in record["tensors"].items():
                by_class.setdefault(tensor_class(n), []).append(vals)
            line = " ".join(f"{c}:{sum(v[0] for v in vs) / len(vs):.2f}/{sum(v[2] for v in vs) / len(vs):.2f}"
                            for c, vs in sorted(by_class.items()))
            print(f"step {step} loss {loss.item():.3f} {line}", flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
