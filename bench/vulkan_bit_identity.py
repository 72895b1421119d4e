"""TD-CLM row/factored steps on the Vulkan backend, saved or compared bit for bit.

A change to the Vulkan passes that must not change results (issue 19, session 3: the
column sums combined on the device) is checked by running this script once with the
library before the change and once with the one after, on the same device:

    python bench/vulkan_bit_identity.py save before.npz      # old build's environment
    python bench/vulkan_bit_identity.py compare before.npz   # new build's environment

Run it with LUMINAV_VULKAN_MAX_RANGE=65536 too, so that tensors span many chunks (the
column sums then cross chunk boundaries). Inputs are seeded, so both runs step the same data.
"""
from __future__ import annotations

import sys

import numpy as np

from luminamoon import optim

# (rows, cols, cautious, bound_mode, param dtype): narrow and wide rows, a partial row
# block (rows % 64 != 0), both reduction rounds (cautious / tensor bound need round 1).
CASES = [(21, 49, False, 0, "f32"), (21, 49, True, 1, "bf16"), (197, 300, False, 0, "f32"),
         (197, 300, True, 2, "f32"), (130, 1031, True, 1, "bf16"), (1000, 257, False, 0, "f32")]


def run_cases() -> dict[str, np.ndarray]:
    out = {}
    for idx, (rows, cols, cautious, bound, dtype) in enumerate(CASES):
        for td in ("factored", "row"):
            rng = np.random.default_rng(1000 + idx)
            n = rows * cols
            x32 = rng.standard_normal(n).astype(np.float32)
            g = (rng.standard_normal(n) * 0.01).astype(np.float32)
            m = (rng.standard_normal(n) * 0.001).astype(np.float32)
            v = ((rng.random(rows + cols if td == "factored" else rows) + 0.05) * 1e-4).astype(np.float32)
            param = x32 if dtype == "f32" else (x32.view(np.uint32) >> 16).astype(np.uint16)
            master = None if dtype == "f32" else x32.copy()
            optim.step(param, g, m, v, master, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1,
                       buffer_mode=1, td_factor=td, cautious=cautious, bound_mode=bound,
                       bound_ratio=0.005 if bound else 0.0, step=3, seed=7, backend="vulkan", rows=rows)
            key = f"{idx}_{td}"
            out[key + "_param"] = param.view(np.uint32 if dtype == "f32" else np.uint16).copy()
            out[key + "_m"] = m.view(np.uint32).copy()
            out[key + "_v"] = v.view(np.uint32).copy()
            if master is not None:
                out[key + "_master"] = master.view(np.uint32).copy()
    return out


def main() -> int:
    action, path = sys.argv[1], sys.argv[2]
    got = run_cases()
    if action == "save":
        np.savez(path, **got)
        print(f"saved {len(got)} arrays from {optim.last_backend()}")
        return 0
    want = np.load(path)
    differ = [k for k in got if not np.array_equal(got[k], want[k])]
    print(f"{len(got)} arrays compared on {optim.last_backend()}: {len(differ)} differ {differ[:6]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
