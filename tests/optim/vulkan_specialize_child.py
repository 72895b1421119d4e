"""Run by test_vulkan_backend.py in a fresh process, so that LUMINAV_VULKAN_SPECIALIZE (read
when the Vulkan context is created) applies: three synchronous and two asynchronous steps of
each case on the vulkan backend, every optional path of lv_reduce / lv_apply taken by some case
and left out by others (Note [CPU specialization] in lv_common.glsl). Prints the vulkan device
line, saves every case's arrays after the steps to argv[1]."""
from __future__ import annotations

import sys

import numpy as np

from luminamoon import _native, optim
from luminav_reference import Hyper
from test_optim_scalar_reference import SEED, make_param, random_state

BASE = Hyper(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)
# (name, hyperparameters, rows, param dtype, master, grad dtype, stochastic rounding)
CASES = [
    ("clm-plain", BASE, None, "f32", False, "f32", True),
    ("clm-tau-lam-gradscale", BASE.with_(tau=0.5, lam=0.3, grad_scale=64.0), None, "f32", False, "f32", True),
    ("clm-cautious-tensorbound-bf16-master", BASE.with_(cautious=True, bound_mode=1, bound_ratio=1e-3), None,
     "bf16", True, "f32", True),
    ("clm-elementbound-f16-nearest", BASE.with_(bound_mode=2, bound_ratio=5e-3), None, "f16", False, "f16", False),
    ("tdclm-factored", BASE.with_(buffer_mode=1, td_factor="factored"), 200, "f32", False, "f32", True),
    ("tdclm-factored-cautious-bound-bf16", BASE.with_(buffer_mode=1, td_factor="factored", cautious=True,
                                                      bound_mode=1, bound_ratio=1e-3), 200, "bf16", True, "bf16",
     True),
    ("tdclm-row-tau", BASE.with_(buffer_mode=1, td_factor="row", tau=0.5), 400, "f32", False, "f32", True),
    ("tdclm-tensor-lam-f16", BASE.with_(buffer_mode=1, td_factor="tensor", lam=0.3), None, "f16", True, "f32", True),
]
N = 40000


def main() -> int:
    names = [name for name, _, _ in optim.backends()]
    print(_native.backend_devices(names.index("vulkan")))
    rng = np.random.default_rng(23)
    out = {}
    for name, hp, rows, dtype, use_master, grad_dtype, sr in CASES:
        x32, m, v, g32 = random_state(rng, hp.buffer_mode, N, hp, rows)
        grad = g32 if grad_dtype == "f32" else make_param(g32, grad_dtype)
        param = make_param(x32, dtype)
        master = x32.copy() if use_master else None
        for step in range(6, 11):
            optim.step(param, grad, m, v, master, **hp.kwargs(), step=step, seed=SEED, backend="vulkan", rows=rows,
                       stochastic_rounding=sr, asynchronous=step > 8)
            assert optim.last_backend().startswith("vulkan"), optim.last_backend()
        optim.synchronize("vulkan")
        out[f"{name}/param"] = param.view(np.uint16) if dtype != "f32" else param.view(np.uint32)
        out[f"{name}/exp_avg"] = m.view(np.uint32)
        out[f"{name}/exp_avg_sq"] = v.view(np.uint32)
        if master is not None:
            out[f"{name}/master"] = master.view(np.uint32)
    np.savez(sys.argv[1], **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
