"""Where TD-CLM loses against AdamW on the char LM of optim_training_quality.py, and what closes it.

    .venv/bin/python bench/optim_tdclm_ablation.py --seeds 0 1 2 --steps 600

Two tables (mean over seeds of the final training loss, the mean of the last 50 steps, and of
the held-out loss):
1. TD-CLM with one tensor (or a set) moved to a CLM group, every other tensor in TD-CLM;
2. pure TD-CLM and AdamW with another lr, beta2 or lam.
Same model, data, batches and initial weights as bench/optim_training_quality.py (its run()).
"""
from __future__ import annotations

import argparse
import statistics

import torch

import optim_training_quality as quality
from luminamoon.optim import LuminaV

TENSOR_SETS = [(), ("embed.weight",), ("hidden.weight",), ("out.weight",), ("embed.weight", "out.weight")]
SINGLE_CHANGES = [  # (optimizer, lr, betas, extra options)
    ("AdamW", 3e-3, (0.9, 0.999), {}),
    ("TD-CLM", 3e-3, (0.9, 0.999), {}),
    ("TD-CLM", 5e-3, (0.9, 0.999), {}),
    ("TD-CLM", 2e-3, (0.9, 0.999), {}),
    ("TD-CLM", 3e-3, (0.9, 0.99), {}),
    ("TD-CLM", 3e-3, (0.9, 0.95), {}),
    ("TD-CLM", 3e-3, (0.9, 0.999), {"lam": 0.1}),
    ("AdamW", 3e-3, (0.9, 0.99), {}),
    ("AdamW", 3e-3, (0.9, 0.95), {}),
    ("AdamW", 5e-3, (0.9, 0.999), {}),
]


def run_with(make_optimizer, lr, seeds, steps, data):
    """Mean final training loss and held-out loss over `seeds`."""
    results = [quality.run(None, lr, seed, steps, data, task="charlm", make_optimizer=make_optimizer)
               for seed in seeds]
    return statistics.mean(r["final"] for r in results), statistics.mean(r["test_loss"] for r in results)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = quality.load_charlm_text()

    def adamw(betas):
        return lambda model, lr, wd: torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=wd)

    base, _ = run_with(adamw((0.9, 0.999)), 3e-3, args.seeds, args.steps, data)
    print(f"AdamW lr 3e-3: final train loss {base:.4f}\n")
    print("| tensors kept in CLM (the rest TD-CLM) | final train loss | vs AdamW | held-out loss |")
    print("|---|---|---|---|")
    for names in TENSOR_SETS:
        def grouped(model, lr, wd, names=names):
            named = list(model.named_parameters())
            clm = [p for n, p in named if n in names]
            tdclm = [p for n, p in named if n not in names]
            groups = [{"params": tdclm, "mode": "tdclm"}] + ([{"params": clm, "mode": "clm"}] if clm else [])
            return LuminaV(groups, lr=lr, weight_decay=wd)
        final, held_out = run_with(grouped, 3e-3, args.seeds, args.steps, data)
        label = ", ".join(f"`{n}`" for n in names) or "none (pure TD-CLM)"
        print(f"| {label} | {final:.4f} | {100 * (final / base - 1):+.2f}% | {held_out:.4f} |")
    print("\n| optimizer | lr | betas | other | final train loss | vs AdamW lr 3e-3 | held-out loss |")
    print("|---|---|---|---|---|---|---|")
    for name, lr, betas, extra in SINGLE_CHANGES:
        if name == "AdamW":
            make = adamw(betas)
        else:
            def make(model, lr, wd, betas=betas, extra=extra):
                return LuminaV(model.parameters(), lr=lr, betas=betas, weight_decay=wd, mode="tdclm", **extra)
        final, held_out = run_with(make, lr, args.seeds, args.steps, data)
        print(f"| {name} | {lr:g} | {betas} | {extra or ''} | {final:.4f} | {100 * (final / base - 1):+.2f}% "
              f"| {held_out:.4f} |")


if __name__ == "__main__":
    main()
