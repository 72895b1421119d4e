"""Training quality of LuminaV on a Llama-style model (issue 14), in two regimes.

One process trains one model per (optimizer, seed) and reports, per run: the final training loss
(mean of the last 20 steps), the held-out loss (evaluated every --held-every steps and at the end),
state bytes per parameter measured from the state tensors, and (unless --no-timing) the GPU time of
opt.step(). Regimes:
- fresh: every step a new batch, all generated once up front (the same sequence for every optimizer);
- repeated: a fixed set of --distinct-batches batches cycled for several epochs.

Data: on the GPU, a fixed random bigram chain (each token has four likely successors, entropy
1.13 nats); with --text, byte-level tokens of real text that ships on this machine
(bench/real_text_corpus.py), the last 5% of it held out. Optimizers: torch AdamW (fused), LuminaV
CLM / TD-CLM v2 (factored, every tensor), the plain-torch spec reference (bench/tdclm_torch_reference.py),
Adam-mini (PyPI `adam-mini`) and torchao's AdamW8bit (PyPI `torchao`).

  python bench/optim_llama_quality.py --steps 400 --seeds 0 --json out.json
  python bench/optim_llama_quality.py --regime repeated --distinct-batches 100 --steps 500 ...
bench/optim_llama_evidence.py runs many of these processes at once and summarises them.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import time

import torch

from llama_model import llama
from tdclm_torch_reference import TDCLMReference

# the model: 12 layers, width 768, 12 heads, MLP 2048, vocabulary 8192 (98M parameters), 16 x 512
LLAMA_98M = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512, batch=16)
VOCAB, SEQ, BATCH = LLAMA_98M["vocab"], LLAMA_98M["seq"], LLAMA_98M["batch"]
SUCCESSOR_WEIGHTS = (0.55, 0.25, 0.12, 0.08)
KINDS = ("adamw_fused", "luminav_clm", "luminav_tdclm", "luminav_tdclm_rms", "luminav_tdclm_rms_half",
         "reference_tdclm", "adam_mini", "adamw8bit", "luminav_tdclm_tau0.5", "luminav_tdclm_tau1",
         "luminav_tdclm_tau2", "luminav_tdclm_edges_row", "luminav_tdclm_edges_clm",
         "reference_tdclm_floor", "reference_tdclm_cover", "luminav_tdclm_cautious",
         "luminav_tdclm_tau0.5_cautious", "luminav_tdclm_tau0.5_lam0.1", "luminav_clm_cautious",
         "luminav_tdclm_cautious_b2_0.99", "luminav_tdclm_cautious_b2_0.999", "luminav_tdclm_cautious_until400",
         "luminav_tdclm_tau0.5_cautious_until400", "luminav_tdclm_tau0.5_cautious_until200")
# TD-CLM with the spec's soft clip u <- tau * tanh(u / tau): AdamW's |u| stays near or below 1.2
TAUS = {"luminav_tdclm_tau0.5": 0.5, "luminav_tdclm_tau1": 1.0, "luminav_tdclm_tau2": 2.0}
# the embedding and the output layer: the tensors Adam-mini keeps per coordinate
EDGE_TENSORS = ("model.embed_tokens.weight", "lm_head.weight")
# TD-CLM with the RMS clip (bound="rms", beyond the spec; issue 14's moonshot): Adafactor's d = 1, and 0.5
RMS_RATIOS = {"luminav_tdclm_rms": 1.0, "luminav_tdclm_rms_half": 0.5}


def chain(seed, vocab=VOCAB, device="cuda"):
    """A fixed random bigram chain: four successors per token with SUCCESSOR_WEIGHTS."""
    gen = torch.Generator(device=device).manual_seed(seed)
    successors = torch.randint(0, vocab, (vocab, 4), device=device, generator=gen)
    return successors, torch.tensor(SUCCESSOR_WEIGHTS, device=device)


def bigram_batches(successors, weights, gen, count, batch=BATCH, seq=SEQ):
    """`count` batches of the chain at once, (count, batch, seq + 1): one gather per position
    over every sequence, so generating 1,500 batches costs ~seq launches, not 1,500 x seq."""
    n = count * batch
    device = successors.device
    tokens = torch.empty(n, seq + 1, dtype=torch.long, device=device)
    tokens[:, 0] = torch.randint(0, successors.shape[0], (n,), device=device, generator=gen)
    cdf = torch.cumsum(weights, 0)[:-1]
    picks = torch.bucketize(torch.rand(n, seq, device=device, generator=gen), cdf, right=True)
    for t in range(seq):
        tokens[:, t + 1] = successors[tokens[:, t], picks[:, t]]
    return tokens.view(count, batch, seq + 1)


def batch(successors, weights, gen):
    return bigram_batches(successors, weights, gen, 1)[0]


def text_tokens(max_docs):
    """Byte-level tokens (vocabulary 256) of the machine's own documentation, documents joined by
    a blank line; (train, held-out), the last 5% held out."""
    from real_text_corpus import cached_texts
    raw = "\n\n".join(cached_texts(limit=max_docs)).encode("utf-8")
    tokens = torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()
    cut = int(len(tokens) * 0.95)
    return tokens[:cut], tokens[cut:]


def windows(tokens, count, batch, seq, gen):
    """`count` batches of non-overlapping windows of seq + 1 tokens, in an order drawn from `gen`."""
    n_windows = (len(tokens) - 1) // (seq + 1)
    if n_windows < count * batch:
        raise SystemExit(f"the text has {n_windows} windows of {seq + 1} tokens; {count * batch} asked for")
    order = torch.randperm(n_windows, generator=gen)[:count * batch]
    starts = order[:, None] * (seq + 1) + torch.arange(seq + 1)
    return tokens[starts].view(count, batch, seq + 1)


def make_data(args, cfg, seed, device):
    """(training batches, held-out batches); step i trains on train[i % len(train)]."""
    count = args.steps if args.regime == "fresh" else args.distinct_batches
    if args.text:
        train_tokens, held_tokens = text_tokens(args.text_docs)
        train = windows(train_tokens, count, cfg["batch"], cfg["seq"], torch.Generator().manual_seed(1000 + seed))
        held = windows(held_tokens, args.held_batches, cfg["batch"], cfg["seq"], torch.Generator().manual_seed(7))
        return train.to(device), held.to(device)
    successors, weights = chain(args.data_seed, cfg["vocab"], device)
    # each seed its own batch sequence from the one chain; the held-out batches are the same for all
    gen = torch.Generator(device=device).manual_seed(args.data_seed + 1 + seed)
    train = bigram_batches(successors, weights, gen, count, cfg["batch"], cfg["seq"])
    held = bigram_batches(successors, weights, torch.Generator(device=device).manual_seed(10_000),
                          args.held_batches, cfg["batch"], cfg["seq"])
    return train, held


def loss_of(model, tokens):
    vocab = model.config.vocab_size
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=tokens.is_cuda):
        logits = model(input_ids=tokens[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))


# the spec's other per-element options on TD-CLM: the cautious mask, and a tenth of the gradient in the
# numerator (lam = 0.1: Nesterov's weight for beta1 = 0.9); and a slower second moment (beta2 0.99 or
# 0.999 in place of 0.95: Adafactor's factors average over longer windows); a kind's suffixes stack
SPEC_OPTIONS = {"_cautious": dict(cautious=True), "_lam0.1": dict(lam=0.1),
                "_b2_0.99": dict(betas=(0.9, 0.99)), "_b2_0.999": dict(betas=(0.9, 0.999))}


# "_untilS" after "_cautious": the mask for the first S steps only (LuminaV's cautious_until, beyond the
# spec: the mask leaves the loss plateau early in every seed, but its N/K scale grows the step late)
MASK_END = re.compile(r"_cautious_until(\d+)$")


def make(kind, model, lr, heads=LLAMA_98M["heads"]):
    kw = dict(lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    mask_end = MASK_END.search(kind)
    if mask_end:
        kw["cautious_until"] = int(mask_end.group(1))
        kind = kind[:mask_end.start()] + "_cautious"
    peeled = True
    while peeled and kind.startswith("luminav"):  # suffixes stack: luminav_tdclm_cautious_b2_0.99
        peeled = False
        for suffix, options in SPEC_OPTIONS.items():
            if kind.endswith(suffix):
                kind = kind.removesuffix(suffix)
                kw.update(options)
                peeled = True
    if kind.startswith("luminav"):  # imported here: the runs of torch's optimizers may start before the build ends
        from luminamoon.optim import LuminaV
    if kind == "adamw_fused":
        return torch.optim.AdamW(model.parameters(), fused=True, **kw)
    if kind == "luminav_clm":
        return LuminaV(model.parameters(), **kw)
    if kind == "luminav_tdclm":
        return LuminaV(model.parameters(), mode="tdclm", td_factor="factored", **kw)
    if kind in RMS_RATIOS:
        return LuminaV(model.parameters(), mode="tdclm", td_factor="factored", bound="rms",
                       bound_ratio=RMS_RATIOS[kind], **kw)
    if kind in TAUS:
        return LuminaV(model.parameters(), mode="tdclm", td_factor="factored", tau=TAUS[kind], **kw)
    if kind in ("luminav_tdclm_edges_row", "luminav_tdclm_edges_clm"):  # the edges per row (R floats) or in CLM
        edges = [p for n, p in model.named_parameters() if n in EDGE_TENSORS]
        body = [p for n, p in model.named_parameters() if n not in EDGE_TENSORS]
        edge_group = dict(mode="tdclm", td_factor="row") if kind.endswith("row") else dict(mode="clm")
        return LuminaV([dict(params=body, mode="tdclm", td_factor="factored"), dict(params=edges, **edge_group)], **kw)
    if kind == "reference_tdclm":  # the spec's formulas in plain torch (bench/tdclm_torch_reference.py)
        return TDCLMReference(model.parameters(), **kw)
    if kind == "reference_tdclm_floor":  # the same with the second moment floored at c * m^2 (beyond the spec)
        return TDCLMReference(model.parameters(), floor=True, **kw)
    if kind == "reference_tdclm_cover":  # the factors as an SM3-style cover of AdamW's moments (beyond the spec)
        return TDCLMReference(model.parameters(), cover=True, **kw)
    if kind == "adam_mini":  # its own partition by parameter name (embedding and lm_head keep Adam)
        from adam_mini import Adam_mini
        return Adam_mini(model.named_parameters(), dim=model.config.hidden_size, n_heads=heads,
                         n_kv_heads=heads, verbose=False, **kw)
    if kind == "adamw8bit":  # block-wise 8-bit moments (tensors >= 4096 values), torch.compile'd step
        from torchao.optim import AdamW8bit
        return AdamW8bit(model.parameters(), **kw)
    raise ValueError(kind)


def set_lr(opt, lr):
    for g in opt.param_groups:
        if isinstance(g["lr"], torch.Tensor):  # torchao keeps lr as a tensor (one compiled step for every value)
            g["lr"].fill_(lr)
        else:
            g["lr"] = lr


def _tensor_bytes(t, seen):
    if hasattr(t, "__tensor_flatten__") and type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
        names, _ = t.__tensor_flatten__()  # a tensor subclass (torchao's 8-bit state): its inner tensors
        return sum(_tensor_bytes(getattr(t, n), seen) for n in names)
    key = (t.untyped_storage().data_ptr(), t.storage_offset(), t.numel())
    if key in seen:
        return 0
    seen.add(key)
    return t.numel() * t.element_size()


def state_bytes_per_param(opt, model):
    """Every tensor of the optimizer's state (moments, factors, scales, step counters), counted once."""
    n = sum(p.numel() for p in model.parameters())
    seen = set()
    total = sum(_tensor_bytes(v, seen) for state in opt.state.values() for v in state.values()
                if isinstance(v, torch.Tensor))
    return total / n


def agreement(kind, anchor, steps, lr):
    """Two copies of one model trained on the same batches by `kind` and by `anchor`:
    the largest relative difference of a parameter tensor after `steps` steps (and its name).
    CLM against AdamW is the control: what bf16 autocast alone leaves between two correct
    implementations of one update."""
    cfg = {k: v for k, v in LLAMA_98M.items() if k != "batch"}
    models, opts = [], []
    for k in (kind, anchor):
        models.append(llama("cuda", **cfg))
        opts.append(make(k, models[-1], lr))
    successors, weights = chain(123)
    tokens_all = bigram_batches(successors, weights, torch.Generator(device="cuda").manual_seed(7), steps)
    for tokens in tokens_all:
        for model, opt in zip(models, opts):
            opt.zero_grad(set_to_none=True)
            loss_of(model, tokens).backward()
            opt.step()
    start = llama("cuda", **cfg)  # the common initial weights
    worst = (0.0, "")
    with torch.no_grad():
        for (name, a), b, a0 in zip(models[0].named_parameters(), models[1].parameters(), start.parameters()):
            # relative to how far the anchor moved the tensor: 1.0 would mean unrelated updates
            diff = float((a - b).norm() / (b - a0).norm().clamp_min(1e-30))
            worst = max(worst, (diff, name))
    return {"max_relative_difference_of_the_update": worst[0], "tensor": worst[1], "steps": steps}


def held_out_loss(model, held):
    with torch.no_grad():
        return statistics.mean(float(loss_of(model, t)) for t in held)


def run(kind, seed, args, cfg, device, progress=None):
    """One training run; `progress(result)` is called with the result so far at every held-out point."""
    t0 = time.time()
    data, held = make_data(args, cfg, seed, device)
    model = llama(device, **{k: v for k, v in cfg.items() if k != "batch"}, init_seed=seed)
    opt = make(kind, model, args.lr, cfg["heads"])
    # the forward and backward by Inductor (--compile): the same model in fewer kernels, so that a dozen
    # runs sharing one GPU finish in one device call; the optimizer's step is never compiled here
    train_loss = functools.partial(loss_of, model)
    if args.compile:
        train_loss = torch.compile(train_loss)
    timing = args.timing and device == "cuda"
    losses, times, held_curve = [], [], []
    result = {"kind": kind, "seed": seed, "regime": args.regime, "steps": args.steps,
              "distinct_batches": len(data), "lr": args.lr}

    def snapshot(step):
        curve = [float(x) for x in losses]
        held_curve.append([step, held_out_loss(model, held)])
        result.update(completed_steps=step, final_train=statistics.mean(curve[-20:]), held_out=held_curve[-1][1],
                      held_curve=held_curve, curve=curve[::10], wall_s=round(time.time() - t0, 1),
                      state_bytes_per_param=state_bytes_per_param(opt, model))
        if progress:
            progress(result)

    for step in range(args.steps):
        set_lr(opt, args.lr * min(1.0, (step + 1) / args.warmup))
        tokens = data[step % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = train_loss(tokens)
        loss.backward()
        if timing:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        opt.step()
        if timing:
            end.record()
            if step >= 10:
                times.append((start, end))
        losses.append(loss.detach())
        if args.held_every and (step + 1) % args.held_every == 0 and step + 1 < args.steps:
            snapshot(step + 1)
    snapshot(args.steps)
    if device == "cuda":
        torch.cuda.synchronize()
    result["step_ms"] = statistics.median(s.elapsed_time(e) for s, e in times) if times else None
    return result


def versions():
    out = {"torch": torch.__version__}
    for name in ("transformers", "adam_mini", "torchao"):
        try:
            from importlib.metadata import version
            out[name] = version(name.replace("_", "-"))
        except Exception:  # noqa: BLE001 - not installed
            out[name] = None
    return out


def write_json(path, obj):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)  # a reader never sees half a file


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--kinds", nargs="*", default=["adamw_fused", "luminav_clm", "luminav_tdclm"], choices=KINDS)
    ap.add_argument("--regime", choices=("fresh", "repeated"), default="fresh")
    ap.add_argument("--distinct-batches", type=int, default=100, help="the repeated regime's set of batches")
    ap.add_argument("--held-batches", type=int, default=4)
    ap.add_argument("--held-every", type=int, default=0, help="also evaluate (and write --json) every N steps")
    ap.add_argument("--data-seed", type=int, default=123)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default=None, help="JSON overriding the model/batch of LLAMA_98M, e.g. "
                    "'{\"hidden\": 128, \"layers\": 2}'")
    ap.add_argument("--text", action="store_true", help="byte-level real text instead of the bigram chain")
    ap.add_argument("--text-docs", type=int, default=None, help="documents of the corpus to read (default all)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--no-timing", dest="timing", action="store_false",
                    help="leave out the step timing (runs sharing one GPU would not measure it)")
    ap.add_argument("--agreement-steps", type=int, default=0,
                    help="first compare luminav_tdclm with reference_tdclm (and, as the control, "
                         "luminav_clm with adamw_fused) over this many steps")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model's forward and backward (not the optimizer)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = dict(LLAMA_98M, **json.loads(args.model or "{}"))
    if args.text:
        cfg["vocab"] = 256
    machine = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    out = {"steps": args.steps, "lr": args.lr, "regime": args.regime, "model": cfg, "text": args.text,
           "compiled_model": args.compile,
           "machine": machine, "versions": versions(), "runs": {}}
    if args.agreement_steps:
        out["agreement"] = {f"{k}~{a}": agreement(k, a, args.agreement_steps, args.lr)
                            for k, a in (("luminav_clm", "adamw_fused"), ("luminav_tdclm", "reference_tdclm"))}
        print(json.dumps(out["agreement"], indent=1), flush=True)

    for seed in args.seeds:
        for kind in args.kinds:
            def progress(r, key=f"{kind}/seed{seed}"):
                out["runs"][key] = r
                if args.json:
                    write_json(args.json, out)
            t0 = time.time()
            r = run(kind, seed, args, cfg, args.device, progress)
            progress(r)
            step = f"step {r['step_ms']:.3f} ms " if r["step_ms"] is not None else ""
            print(f"{args.regime} {kind:14s} seed {seed}: train {r['final_train']:.4f} held-out {r['held_out']:.4f} "
                  f"state {r['state_bytes_per_param']:.3f} B/param {step}({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
