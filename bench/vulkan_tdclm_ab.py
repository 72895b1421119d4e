"""One TD-CLM factored step on the Vulkan backend, timed (median wall seconds), as JSON.

For an A/B of two builds on one machine, run it alternately in each build's
environment (issue 19, session 3, on lavapipe):

    python bench/vulkan_tdclm_ab.py --log2n 20 --label after
"""
from __future__ import annotations

import argparse
import json

import numpy as np

import harness
from luminamoon import optim


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    rows = 1 << (a.log2n // 2)
    n = 1 << a.log2n
    cols = n // rows
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    g = (rng.standard_normal(n) * 0.01).astype(np.float32)
    m = np.zeros(n, np.float32)
    v = np.full(rows + cols, 1e-4, np.float32)

    def step():
        optim.step(x, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, buffer_mode=1,
                   td_factor="factored", rows=rows, step=3, backend="vulkan")

    t = harness.measure(step, repeats=a.repeats)
    print(json.dumps({"label": a.label, "log2n": a.log2n, "rows": rows, "cols": cols, "wall_s": t.wall_s,
                      "spread": round(t.spread, 3), "backend": optim.last_backend(), "machine": harness.machine()}))


if __name__ == "__main__":
    main()
