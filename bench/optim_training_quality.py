"""Training-quality evidence for LuminaV (issue 5): real data shipped offline, several seeds, AdamW vs LuminaV.

Two tasks: `digits` (an MLP on scikit-learn's bundled 8x8 digits) and
`charlm` (a character-level MLP language model on the Python source files of
torch.nn.modules, text that ships inside the installed torch package; the
last 10% of the text is held out).

Every run starts from the same weights per seed and sees the same batches;
each optimizer gets the same step budget and the same learning-rate grid,
and is reported at AdamW's learning rate and at its own best grid point
(chosen by the mean final training loss over the seeds). Writes a Markdown
table to stdout and, when matplotlib is installed, a PNG of the mean curves.

    .venv/bin/python bench/optim_training_quality.py --task digits --seeds 0 1 2 --steps 600 --png docs/optim_quality_digits.png
    .venv/bin/python bench/optim_training_quality.py --task charlm --seeds 0 1 2 --steps 800 --png docs/optim_quality_charlm.png
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from luminamoon.demo import load_digits_split, make_model
from luminamoon.optim import LuminaV

VARIANTS = {
    "AdamW": None,
    "CLM (defaults)": dict(mode="clm"),
    "TD-CLM": dict(mode="tdclm"),
    "CLM + cautious": dict(mode="clm", cautious=True),
    "CLM + tau=1": dict(mode="clm", tau=1.0),
    "TD-CLM + cautious": dict(mode="tdclm", cautious=True),
    # Adam-mini's observation, as a recipe with param groups: the output layer,
    # whose rows are classes of very different frequency, keeps its per-element
    # second moment (CLM); every other tensor uses TD-CLM.
    "TD-CLM, output layer CLM": dict(mode="tdclm", output_layer_clm=True),
}
BATCH = 64
CHAR_BATCH = 128
WEIGHT_DECAY = 0.01
TAIL = 50  # final loss = mean training loss over the last TAIL steps


CONTEXT, EMBED, HIDDEN, VOCAB = 24, 24, 256, 97  # char LM: printable ASCII + newline + "other"


def load_charlm_text():
    """torch.nn.modules' Python sources as one token stream (bytes 32..126, newline, other)."""
    from pathlib import Path
    files = sorted((Path(torch.__file__).parent / "nn" / "modules").glob("*.py"))
    raw = torch.tensor(bytearray(b"".join(f.read_bytes() for f in files)), dtype=torch.int64)
    tokens = torch.where((raw >= 32) & (raw <= 126), raw - 32, torch.full_like(raw, 96))
    tokens = torch.where(raw == 10, torch.full_like(raw, 95), tokens)
    cut = int(len(tokens) * 0.9)
    return tokens[:cut], tokens[cut:]


class CharMLP(torch.nn.Module):
    """A Bengio-style MLP language model: the last CONTEXT characters predict the next one."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, EMBED)
        self.hidden = torch.nn.Linear(CONTEXT * EMBED, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, ctx):
        return self.out(torch.nn.functional.gelu(self.hidden(self.embed(ctx).flatten(1))))


def charlm_batch(tokens, starts):
    idx = starts[:, None] + torch.arange(CONTEXT + 1)
    window = tokens[idx]
    return window[:, :-1], window[:, -1]


def param_groups(model, options):
    """The model's parameters, split in two groups when the variant puts the last
    Linear layer (the output layer) in a CLM group of its own."""
    options = dict(options)
    if not options.pop("output_layer_clm", False):
        return model.parameters(), options
    head = list([m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].parameters())
    body = [p for p in model.parameters() if all(p is not h for h in head)]
    return [{"params": body}, {"params": head, "mode": "clm"}], options


def run(options, lr, seed, steps, data, task="digits", make_optimizer=None):
    """One training run; `options` None is AdamW, else LuminaV's options. `make_optimizer(model, lr,
    weight_decay)`, when given, builds the optimizer instead (bench/optim_tdclm_ablation.py)."""
    if task == "charlm":
        train_tokens, test_tokens = data
        torch.manual_seed(seed)
        model = CharMLP()
    else:
        (x, y), (x_test, y_test) = data
        model = make_model(seed)
    if make_optimizer is not None:
        opt = make_optimizer(model, lr, WEIGHT_DECAY)
    elif options is None:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)
    else:
        params, options = param_groups(model, options)
        opt = LuminaV(params, lr=lr, weight_decay=WEIGHT_DECAY, **options)
    gen = torch.Generator().manual_seed(seed + 1)
    losses = []
    if task == "digits":
        order = torch.randperm(len(y), generator=gen)
    for s in range(steps):
        if task == "charlm":
            xb, yb = charlm_batch(train_tokens, torch.randint(0, len(train_tokens) - CONTEXT - 1, (CHAR_BATCH,),
                                                              generator=gen))
        else:
            lo = (s * BATCH) % (len(y) - BATCH + 1)
            if lo < BATCH and s:
                order = torch.randperm(len(y), generator=gen)  # a new epoch
            idx = order[lo:lo + BATCH]
            xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    if task == "charlm":
        probe = torch.Generator().manual_seed(12345)
        x_test, y_test = charlm_batch(test_tokens, torch.randint(0, len(test_tokens) - CONTEXT - 1, (8192,),
                                                                 generator=probe))
    with torch.no_grad():
        test_loss = float(torch.nn.functional.cross_entropy(model(x_test), y_test))
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    # Optimizer state measured from the state tensors: per-element buffers, and per-tensor scalars.
    vector_bytes, scalars = 0, 0
    for p, st in opt.state.items():
        for key in ("exp_avg", "exp_avg_sq", "master"):
            if key in st:
                if st[key].numel() == p.numel():
                    vector_bytes += st[key].nbytes
                else:
                    scalars += st[key].numel()
    n_params = sum(p.numel() for p in model.parameters())
    return dict(losses=losses, final=sum(losses[-TAIL:]) / TAIL, test_loss=test_loss, accuracy=accuracy,
                bytes_per_param=vector_bytes / n_params, scalars=scalars)


def mean_std(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", choices=["digits", "charlm"], default="digits")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 2e-3, 4e-3, 8e-3])
    parser.add_argument("--base-lr", type=float, default=2e-3)
    parser.add_argument("--png", default=None)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="which optimizers to run (AdamW is always run: it is the anchor)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    chosen = {name: VARIANTS[name] for name in VARIANTS if name == "AdamW" or name in args.variants}
    start = time.perf_counter()
    if args.task == "charlm":
        text = load_charlm_text()
        datas = {seed: text for seed in args.seeds}
    else:
        datas = {seed: load_digits_split(seed) for seed in args.seeds}
    grid = {}  # (variant, lr) -> [run per seed]
    for name, options in chosen.items():
        for lr in sorted(set(args.lrs) | {args.base_lr}):
            grid[name, lr] = [run(options, lr, seed, args.steps, datas[seed], args.task) for seed in args.seeds]
    elapsed = time.perf_counter() - start

    adamw_base = mean_std([r["final"] for r in grid["AdamW", args.base_lr]])[0]
    best = {name: min((lr for (n, lr) in grid if n == name),
                      key=lambda lr: mean_std([r["final"] for r in grid[name, lr]])[0]) for name in chosen}
    adamw_best = mean_std([r["final"] for r in grid["AdamW", best["AdamW"]]])[0]

    if args.task == "charlm":
        n = sum(len(t) for t in datas[args.seeds[0]])
        what = (f"character-level MLP LM (context {CONTEXT}, embedding {EMBED}, hidden {HIDDEN}, vocabulary "
                f"{VOCAB}) on the {n} characters of torch.nn.modules' sources (10% held out; held-out loss on "
                f"8192 fixed windows), batch {CHAR_BATCH}")
    else:
        what = f"MLP 64-128-10 (GELU) on scikit-learn digits (1400 train / 397 held out), batch {BATCH}"
    print(f"{what}, "
          f"{args.steps} steps, weight decay {WEIGHT_DECAY}, seeds {args.seeds}, lr grid {args.lrs}; "
          f"final loss = mean training loss of the last {TAIL} steps, mean +- std over seeds. "
          f"{elapsed:.0f} s in all.\n")
    print("| optimizer | lr | final train loss | vs AdamW (same lr) | best lr | final loss at best lr "
          "| vs AdamW at its best lr | held-out loss (best lr) | held-out accuracy (best lr) | state bytes/param |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in chosen:
        base = [r["final"] for r in grid[name, args.base_lr]]
        b_runs = grid[name, best[name]]
        fin, fin_sd = mean_std(base)
        bfin, bfin_sd = mean_std([r["final"] for r in b_runs])
        tl, tl_sd = mean_std([r["test_loss"] for r in b_runs])
        acc, acc_sd = mean_std([r["accuracy"] for r in b_runs])
        r0 = b_runs[0]
        per_param = f"{r0['bytes_per_param']:g}" + (f" + {r0['scalars']} fp32 scalars" if r0["scalars"] else "")
        print(f"| {name} | {args.base_lr:g} | {fin:.4f} +- {fin_sd:.4f} | {100 * (fin / adamw_base - 1):+.2f}% "
              f"| {best[name]:g} | {bfin:.4f} +- {bfin_sd:.4f} | {100 * (bfin / adamw_best - 1):+.2f}% "
              f"| {tl:.4f} +- {tl_sd:.4f} | {acc:.3f} +- {acc_sd:.3f} | {per_param} |")
    if "CLM (defaults)" in chosen:
        clm = grid["CLM (defaults)", args.base_lr]
        ada = grid["AdamW", args.base_lr]
        gap = max(abs(a - b) for rc, ra in zip(clm, ada) for a, b in zip(rc["losses"], ra["losses"]))
        print(f"\nCLM (defaults) vs AdamW at lr {args.base_lr:g}: largest per-step training-loss difference "
              f"over all seeds and steps {gap:.2e}.")

    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, which in zip(axes, ("same", "best")):
            for name in chosen:
                lr = args.base_lr if which == "same" else best[name]
                runs = grid[name, lr]
                curve = [statistics.mean(r["losses"][s] for r in runs) for s in range(args.steps)]
                smooth = [sum(curve[max(0, s - 19):s + 1]) / len(curve[max(0, s - 19):s + 1])
                          for s in range(args.steps)]
                style = "--" if name == "CLM (defaults)" else "-"
                ax.plot(range(1, args.steps + 1), smooth, style, label=f"{name} (lr {lr:g})")
            ax.set_yscale("log")
            ax.set_xlabel("step")
            ax.set_ylabel("training loss (mean of seeds, 20-step average)")
            ax.set_title("same lr" if which == "same" else "each optimizer at its best grid lr")
            ax.legend(fontsize=8)
        fig.suptitle(f"LuminaV vs AdamW, {args.task}, seeds {args.seeds}")
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
        print(f"\nPlot: {args.png}")


if __name__ == "__main__":
    main()
