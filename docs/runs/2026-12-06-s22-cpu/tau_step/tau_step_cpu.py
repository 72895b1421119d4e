"""Session 22: the CPU (simd) step time of TD-CLM v2 factored with the soft clip the README suggests
(tau = 0.5, one tanh per element) against tau = 0, and CLM and torch's fused AdamW, on one
SIDE x SIDE fp32 tensor, through the torch front end; the kinds alternate, medians of ROUNDS rounds of
STEPS steps each (2 threads).

    python tau_step_cpu.py [SIDE ROUNDS STEPS]     (4096 15 10; the 2^28 run: 16384 5 3)
"""
import statistics
import sys
import time

import torch
from luminamoon.optim import LuminaV

SIDE, ROUNDS, STEPS = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (4096, 15, 10)
torch.manual_seed(0)
KINDS = {
    "torch_fused": lambda p: torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, fused=True),
    "luminav_clm": lambda p: LuminaV([p], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1),
    "luminav_tdclm": lambda p: LuminaV([p], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, mode="tdclm"),
    "luminav_tdclm_tau0.5": lambda p: LuminaV([p], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, mode="tdclm",
                                              tau=0.5),
}
setups = {}
for kind, make in KINDS.items():
    p = torch.nn.Parameter(torch.randn(SIDE, SIDE))
    p.grad = torch.randn(SIDE, SIDE)
    opt = make(p)
    opt.step()  # state allocated outside the timing
    setups[kind] = opt
times = {k: [] for k in KINDS}
for _ in range(ROUNDS):
    for kind, opt in setups.items():
        t0 = time.perf_counter()
        for _ in range(STEPS):
            opt.step()
        times[kind].append((time.perf_counter() - t0) / STEPS * 1e3)
med = {k: statistics.median(v) for k, v in times.items()}
n = SIDE * SIDE
for k, v in med.items():
    print(f"{k:22s} {v:7.2f} ms a step  {n / v / 1e3:7.0f} M elem/s  vs torch fused {med['torch_fused'] / v:.2f}x")
print(f"tau=0.5 / tau=0: {med['luminav_tdclm_tau0.5'] / med['luminav_tdclm']:.3f}")
