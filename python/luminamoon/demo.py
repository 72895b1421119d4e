"""`luminamoon demo`: a small MLP on scikit-learn's digits trained with LuminaV (CLM, TD-CLM) and AdamW.

The data ships with scikit-learn (no download). Every optimizer starts from
the same weights and sees the same batches; the loss curves are printed side
by side, then each run's held-out accuracy and time.
"""
from __future__ import annotations

import time

# Each optimizer and its options; lr is shared unless set here.
OPTIMIZERS = {
    "AdamW": dict(kind="adamw"),
    "LuminaV CLM": dict(kind="luminav", mode="clm"),
    # the setting the README suggests for TD-CLM (rows T3o-T3q, T8i): the soft clip and the spec's cautious
    # mask for the first steps only (400 of a 98M model's 1,500 there; 100 of this demo's 300)
    "LuminaV TD-CLM v2": dict(kind="luminav", mode="tdclm", td_factor="factored", tau=0.5, cautious=True,
                              cautious_until=100),
}
LR = 2e-3
WEIGHT_DECAY = 0.01
BATCH = 64


def load_digits_split(seed: int):
    """scikit-learn's 8x8 digits as float tensors, split 1400 train / 397 held out."""
    import torch
    from sklearn.datasets import load_digits
    digits = load_digits()
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(digits.target), generator=gen)
    x = torch.tensor(digits.data, dtype=torch.float32)[order] / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)[order]
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


def make_model(seed: int):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))


def make_optimizer(spec: dict, params, lr: float = LR):
    import torch

    from .optim import LuminaV
    if spec["kind"] == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=WEIGHT_DECAY)
    options = {k: v for k, v in spec.items() if k not in ("kind", "lr")}
    return LuminaV(params, lr=spec.get("lr", lr), weight_decay=WEIGHT_DECAY, **options)


def state_bytes_per_parameter(opt, model) -> float:
    """The moments' bytes (exp_avg, exp_avg_sq) over the parameter count, read off the state tensors."""
    count = sum(p.numel() for p in model.parameters())
    held = sum(state[k].numel() * state[k].element_size() for state in opt.state.values()
               for k in ("exp_avg", "exp_avg_sq"))
    return held / count


def train(spec: dict, steps: int, seed: int, data=None, lr: float = LR):
    """Trains one model; returns (training losses per step, held-out accuracy, seconds, state bytes/param)."""
    import torch
    (x, y), (x_test, y_test) = data if data is not None else load_digits_split(seed)
    model = make_model(seed)
    opt = make_optimizer(spec, model.parameters(), lr)
    gen = torch.Generator().manual_seed(seed + 1)
    order = torch.randperm(len(y), generator=gen)
    losses = []
    start = time.perf_counter()
    for s in range(steps):
        lo = (s * BATCH) % (len(y) - BATCH + 1)
        idx = order[lo:lo + BATCH]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    seconds = time.perf_counter() - start
    with torch.no_grad():
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    return losses, accuracy, seconds, state_bytes_per_parameter(opt, model)


def main(steps: int | None = None, seed: int = 0) -> int:
    import torch
    torch.set_num_threads(1)  # a tiny model: threads only add overhead
    steps = steps or 300
    data = load_digits_split(seed)
    results = {name: train(spec, steps, seed, data) for name, spec in OPTIMIZERS.items()}
    names = list(results)
    print(f"MLP 64-128-10 on scikit-learn digits, batch {BATCH}, lr {LR}, weight decay {WEIGHT_DECAY}, "
          f"seed {seed}: training loss (mean over the last 10 steps)")
    print("step  " + "".join(f"{n:>19}" for n in names))
    every = max(1, steps // 15)
    for s in list(range(every - 1, steps, every)) + ([steps - 1] if (steps - 1) % every != every - 1 else []):
        window = slice(max(0, s - 9), s + 1)
        row = [sum(results[n][0][window]) / len(results[n][0][window]) for n in names]
        print(f"{s + 1:>4}  " + "".join(f"{v:>19.4f}" for v in row))
    print("held-out accuracy " + "".join(f"{results[n][1]:>19.3f}" for n in names))
    print("seconds           " + "".join(f"{results[n][2]:>19.2f}" for n in names))
    print("state B/param     " + "".join(f"{results[n][3]:>19.3f}" for n in names))
    adamw, clm = results["AdamW"][0], results["LuminaV CLM"][0]
    gap = max(abs(a - b) for a, b in zip(adamw, clm))
    print(f"largest |CLM - AdamW| loss difference over {steps} steps: {gap:.2e} "
          "(CLM with default options is AdamW's update)")
    print("TD-CLM v2 runs with tau=0.5, cautious=True, cautious_until=100: its first moment and R + C "
          "second-moment factors per R x C tensor, the update masked where its sign disagrees with the "
          "gradient's for the first 100 steps")
    print("\ndata engine: the FusedPipeline over the small corpus shipped with the package")
    import tempfile
    from .data.cli import main as data_main  # the pipeline's half of the demo (issue 8)
    with tempfile.TemporaryDirectory(prefix="luminamoon-demo-") as work:
        clean = f"{work}/clean"
        code = data_main(["demo", "-o", clean])
        if code:
            return code
        print("\ntraining data: tokenize the cleaned corpus, stream packed batches into a small language model")
        train_on_packed_batches(clean, seed=seed)
    return 0


LM_SEQ_LEN, LM_BATCH, LM_STEPS, LM_VOCAB = 64, 16, 60, 1024


def train_on_packed_batches(clean_dir: str, seed: int = 0, steps: int = LM_STEPS) -> dict:
    """BPE trained on the cleaned corpus with `tokenizers`' trainer, token shards, then a TokenLoader
    streaming packed sequences into a next-token MLP trained with LuminaV; the loss is masked at
    document boundaries (segment_ids). Returns the figures it prints."""
    import os

    import torch

    from .data import FusedPipeline, TokenLoader, committed_part_files, tokenize_corpus, train_bpe_tokenizer
    from .optim import LuminaV
    parts = committed_part_files(clean_dir)
    reader = FusedPipeline(clean=False, quality=False, dedup=False, minhash=False, pii=False, format="ndjson")
    texts = [t for batch in reader.stream(parts) for t in batch.text]
    tok_path = os.path.join(clean_dir, "tokenizer.json")
    train_bpe_tokenizer(texts, vocab_size=LM_VOCAB, path=tok_path)
    tokens_dir = os.path.join(clean_dir, "tokens")
    summary = tokenize_corpus(parts, tokens_dir, tok_path)
    print(f"tokenized {summary['documents']} kept documents: {summary['tokens']:,} tokens in "
          f"{summary['shards']} shard(s) + Megatron .bin/.idx (BPE vocabulary {LM_VOCAB})")
    loader = TokenLoader(tokens_dir, LM_SEQ_LEN, LM_BATCH, seed=seed, num_epochs=None)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(LM_VOCAB, 64), torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, LM_VOCAB))
    opt = LuminaV(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses, saved, start = [], None, time.perf_counter()
    for step, batch in enumerate(loader):
        if step == steps:
            break
        ids, seg = batch["input_ids"], batch["segment_ids"]
        target = ids[:, 1:]
        keep = (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] >= 0)  # never predict across a document boundary
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits[keep], target[keep])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if step == steps // 2:
            saved = (loader.state_dict(), None)
        elif step == steps // 2 + 1:
            saved = (saved[0], batch["sample_index"].clone())
    seconds = time.perf_counter() - start
    resumed = TokenLoader(tokens_dir, LM_SEQ_LEN, LM_BATCH, seed=seed, num_epochs=None, world_size=1)
    resumed.load_state_dict(saved[0])
    exact = bool(torch.equal(next(iter(resumed))["sample_index"], saved[1]))
    streamed = steps * LM_BATCH * LM_SEQ_LEN
    print(f"{steps} steps of batch {LM_BATCH} x {LM_SEQ_LEN} packed tokens, LuminaV CLM: loss "
          f"{sum(losses[:5]) / 5:.3f} -> {sum(losses[-5:]) / 5:.3f} (first/last 5 steps), "
          f"{streamed / seconds:,.0f} tokens/s through loader + model")
    print(f"loader state_dict at step {steps // 2} -> a new loader resumes at the same next batch: {exact}")
    return {"losses": losses, "exact_resume": exact, "tokens_per_second": streamed / seconds}
