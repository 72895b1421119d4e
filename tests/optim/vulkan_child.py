"""Run by test_vulkan_backend.py in a fresh process, so that the environment read when the
Vulkan context is created (LUMINAV_VULKAN_MAX_RANGE, LUMINAV_VULKAN_IMPORT,
LUMINAV_VULKAN_VALIDATION) applies: a set of steps on the vulkan backend against the float64
reference; exits 1 with the failure, else prints {"cases": n, "chunks_seen": bool}."""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from luminamoon import optim
from luminav_reference import Hyper, exp_avg_sq_length, reference_step
# SEED: expected_rounding keys on it
from test_optim_scalar_reference import SEED, check_step, make_param, param_values, start_of_step

BASE = Hyper(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)
# (name, hyperparameters, N, rows, param dtype, master, grad dtype)
CASES = [
    ("clm-f32", BASE.with_(tau=0.5, lam=0.3), 40000, None, "f32", False, "f32"),
    ("clm-bf16-master-cautious-tensorbound", BASE.with_(cautious=True, bound_mode=1, bound_ratio=1e-3), 40000,
     None, "bf16", True, "f32"),
    ("clm-f16-master-elementbound-f16grad", BASE.with_(bound_mode=2, bound_ratio=5e-3), 40000, None, "f16", True,
     "f16"),
    ("tdclm-factored-narrow", BASE.with_(buffer_mode=1, td_factor="factored", cautious=True, bound_mode=1,
                                         bound_ratio=1e-3), 40000, 200, "f32", False, "f32"),
    ("tdclm-factored-wide", BASE.with_(buffer_mode=1, td_factor="factored", tau=0.5), 40960, 80, "bf16", True,
     "bf16"),
    ("tdclm-row", BASE.with_(buffer_mode=1, td_factor="row", lam=0.3), 40000, 400, "f32", False, "f32"),
    ("tdclm-tensor", BASE.with_(buffer_mode=1, td_factor="tensor", cautious=True), 40000, None, "f16", True, "f32"),
    ("tdclm-one-column", BASE.with_(buffer_mode=1, td_factor="factored"), 40000, 40000, "f32", False, "f32"),
    # The RMS clip (beyond the spec): the shaders' tensor-bound scaling, its factor formed on the host.
    ("clm-rmsclip", BASE.with_(bound_mode=3, bound_ratio=0.05), 40000, None, "f32", False, "f32"),
    ("tdclm-factored-rmsclip", BASE.with_(buffer_mode=1, td_factor="factored", cautious=True, bound_mode=3,
                                          bound_ratio=0.05), 40000, 200, "f32", False, "f32"),
]


def main() -> int:
    rng = np.random.default_rng(5)
    max_range = int(os.environ.get("LUMINAV_VULKAN_MAX_RANGE", "0"))
    chunks_seen = False
    for name, hp, n, rows, dtype, use_master, grad_dtype in CASES:
        x32 = (rng.standard_normal(n) * 0.5).astype(np.float32)
        m = (rng.standard_normal(n) * 0.01).astype(np.float32)
        v = np.abs(rng.standard_normal(exp_avg_sq_length(n, rows or n, hp)) * 1e-4).astype(np.float32)
        g32 = (rng.standard_normal(n) * 0.01 + 0.003).astype(np.float32)
        grad = g32 if grad_dtype == "f32" else make_param(g32, grad_dtype)
        g = g32 if grad_dtype == "f32" else param_values(grad, grad_dtype).astype(np.float32)
        param, master, x_old = start_of_step(x32, dtype, use_master)
        ref = reference_step(hp, x_old, m, v, g, 6, rows)
        if hp.bound_mode and not ref.bound_binds:
            print(f"{name}: the bound does not bind on this data", file=sys.stderr)
            return 1
        optim.step(param, grad, m, v, master, **hp.kwargs(), step=6, seed=SEED, backend="vulkan", rows=rows)
        assert optim.last_backend().startswith("vulkan"), optim.last_backend()
        try:
            check_step(hp, dtype, param, master, m, v, ref, 6)
        except AssertionError as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 1
        chunks_seen = chunks_seen or (max_range > 0 and n * 4 > max_range)
    # A non-finite gradient: nothing written.
    x = np.ones(40000, np.float32)
    g = np.full(40000, 0.1, np.float32)
    g[39999] = np.nan
    m = np.zeros(40000, np.float32)
    try:
        optim.step(x, g, m, m.copy(), **BASE.kwargs(), step=1, backend="vulkan")
        print("non-finite gradient was accepted", file=sys.stderr)
        return 1
    except optim.NonFiniteGradientError:
        pass
    if not (x == 1).all() or m.any():
        print("non-finite gradient wrote", file=sys.stderr)
        return 1
    print(json.dumps({"cases": len(CASES), "chunks_seen": chunks_seen}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
