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
    "LuminaV TD-CLM v2": dict(kind="luminav", mode="tdclm", td_factor="factored"),
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
    print("step  " + "".join(f"{n:>16}" for n in names))
    every = max(1, steps // 15)
    for s in list(range(every - 1, steps, every)) + ([steps - 1] if (steps - 1) % every != every - 1 else []):
        window = slice(max(0, s - 9), s + 1)
        row = [sum(results[n][0][window]) / len(results[n][0][window]) for n in names]
        print(f"{s + 1:>4}  " + "".join(f"{v:>16.4f}" for v in row))
    print("held-out accuracy " + "".join(f"{results[n][1]:>16.3f}" for n in names))
    print("seconds           " + "".join(f"{results[n][2]:>16.2f}" for n in names))
    print("state B/param     " + "".join(f"{results[n][3]:>16.3f}" for n in names))
    adamw, clm = results["AdamW"][0], results["LuminaV CLM"][0]
    gap = max(abs(a - b) for a, b in zip(adamw, clm))
    print(f"largest |CLM - AdamW| loss difference over {steps} steps: {gap:.2e} "
          "(CLM with default options is AdamW's update)")
    print("\ndata engine: the FusedPipeline over the small corpus shipped with the package")
    from .data.cli import main as data_main  # the pipeline's half of the demo (issue 8)
    return data_main(["demo"])
