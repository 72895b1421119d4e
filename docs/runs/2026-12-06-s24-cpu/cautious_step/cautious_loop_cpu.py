"""Session 24, the cautious mask's step in the user's loop on the CPU: a Llama training step (12 layers,
width 384, MLP 1024, vocabulary 8192; 27.5 M parameters in 111 tensors; batch 16 x 64 tokens, 2 threads),
LuminaV TD-CLM factored without and with cautious=True and CLM with cautious=True, alternating step by
step after 3 warm-up steps: the time of opt.step() and of the whole step (forward, backward, step),
medians of STEPS steps each. Run it once per build (PYTHONPATH at the build's site), alternating builds.

    python cautious_loop_cpu.py [STEPS]        (20)
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "bench"))
from llama_model import llama  # noqa: E402
from luminamoon.optim import LuminaV  # noqa: E402

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
torch.set_num_threads(2)
cfg = dict(hidden=384, layers=12, heads=6, mlp=1024, vocab=8192, seq=64)
gen = torch.Generator().manual_seed(0)
tokens = torch.randint(0, cfg["vocab"], (STEPS + 3, 16, cfg["seq"] + 1), generator=gen)
KINDS = {"tdclm": dict(mode="tdclm"), "tdclm_cautious": dict(mode="tdclm", cautious=True),
         "clm_cautious": dict(mode="clm", cautious=True)}
runs = {}
for name, options in KINDS.items():
    model = llama("cpu", **cfg, init_seed=0)
    opt = LuminaV(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, **options)
    runs[name] = (model, opt, {"step_ms": [], "whole_ms": []})
for i in range(STEPS + 3):
    for name, (model, opt, times) in runs.items():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        x = tokens[i]
        loss = torch.nn.functional.cross_entropy(model(input_ids=x[:, :-1]).logits.reshape(-1, cfg["vocab"]),
                                                 x[:, 1:].reshape(-1))
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        if i >= 3:
            times["step_ms"].append((t2 - t1) * 1e3)
            times["whole_ms"].append((t2 - t0) * 1e3)
import luminamoon  # noqa: E402
print(f"site {os.path.dirname(luminamoon.__file__)}; medians of {STEPS} steps: " + "; ".join(
    f"{name} opt.step() {statistics.median(t['step_ms']):.2f} ms, whole {statistics.median(t['whole_ms']):.1f} ms"
    for name, (_, _, t) in runs.items()), flush=True)
