"""What one luminamoon.optim.step call costs beyond the engine's own step (issue 22, session 3).

    python bench/functional_step_overhead.py [--n 16] [--rounds 7]

Side by side, round-robin (bench/harness.py): `optim.step` on NumPy arrays of
n floats, and the anchor, the bare C API call of the same step
(`_native.step_multi` with prebuilt structs, no checks). The difference is the
Python front end plus the native checks; run it under the free-threaded and the
normal interpreter. One LuminaV thread, so that only the call is measured.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from harness import measure_side_by_side

from luminamoon import _native, optim
from luminamoon.optim import functional

HP = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    _native.set_num_threads(1)
    n = args.n
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    g, m, v = x * 0.01, np.zeros(n, np.float32), np.zeros(n, np.float32)
    hp = functional.make_hyperparams(**HP, tau=0.0, lam=0.0, buffer_mode=2, cautious=False, bound_mode=0,
                                     bound_ratio=0.0, step=1, check_finite=True, stochastic_rounding=True)
    desc = _native.TensorDesc(x.ctypes.data, g.ctypes.data, m.ctypes.data, v.ctypes.data, 0, n, 0, 0,
                              _native.DTYPE_F32, _native.DTYPE_F32, n, _native.TD_FACTORED)
    options = _native.RunOptions("auto", _native.DEVICE_CPU, 0, 0)
    t = iter(range(1, 1 << 62))
    timings = measure_side_by_side({
        "optim.step": lambda: optim.step(x, g, m, v, **HP, step=next(t)),
        "bare C call (anchor)": lambda: _native.step_multi(hp, [desc], options),
    }, rounds=args.rounds, min_time=0.2, warmup=100)
    ours, anchor = timings["optim.step"].wall_s, timings["bare C call (anchor)"].wall_s
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    print(f"Python {sys.version.split()[0]}{'t' if 't' in sys.abiflags else ''} (GIL {'on' if gil else 'off'}), "
          f"n = {n}: optim.step {ours * 1e6:.2f} us, bare C call {anchor * 1e6:.2f} us, "
          f"front end + checks {(ours - anchor) * 1e6:.2f} us per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
