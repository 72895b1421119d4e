"""Session 22, row T2k in the user's loop: a Llama training step on the CPU (12 layers, width 384, MLP
1024, vocabulary 8192; 27.5 M parameters in 111 tensors; batch 16 x 64 tokens, 2 threads), LuminaV TD-CLM
factored with tau = 0 and with tau = 0.5, the two alternating step by step after 3 warm-up steps: the
time of opt.step() and of the whole step (forward, backward, step), medians of STEPS steps each.
Run it once per build (PYTHONPATH at the build's site), alternating builds.

    python tau_loop_cpu.py [STEPS]        (20)
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
runs = {}
for tau in (0.0, 0.5):
    model = llama("cpu", **cfg, init_seed=0)
    opt = LuminaV(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, mode="tdclm", tau=tau)
    runs[tau] = (model, opt, {"step_ms": [], "whole_ms": []})
params = sum(p.numel() for p in runs[0.0][0].parameters())
for i in range(STEPS + 3):
    for tau, (model, opt, times) in runs.items():
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
print(f"site {os.path.dirname(luminamoon.__file__)}; {params / 1e6:.1f} M parameters; medians of {STEPS} steps")
for tau, (_, _, times) in runs.items():
    print(f"tau={tau}: opt.step() {statistics.median(times['step_ms']):.2f} ms, "
          f"whole step {statistics.median(times['whole_ms']):.1f} ms")
s0, s5 = (statistics.median(runs[t][2]["step_ms"]) for t in (0.0, 0.5))
w0, w5 = (statistics.median(runs[t][2]["whole_ms"]) for t in (0.0, 0.5))
print(f"tau=0.5 / tau=0: opt.step() {s5 / s0:.2f}x, whole step {w5 / w0:.3f}x")
