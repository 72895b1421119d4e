"""Shared cases of the Triton backend's tests (tests/optim/test_triton_interpreted.py on the CPU,
tests/optim/test_gpu_triton.py on a GPU): one step of a TritonStepPlan on fresh random state,
checked against the float64 reference (luminav_reference.py) under the spec's accuracy contract."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from luminav_reference import Hyper, accuracy_factor, assert_within_forward_error, exp_avg_sq_length, reference_step

from luminamoon.optim.triton_step import GroupOptions, GroupStep, TensorStep, TritonStepPlan

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def options_of(hp: Hyper, **kw) -> GroupOptions:
    return GroupOptions(lr=hp.lr, beta1=hp.beta1, beta2=hp.beta2, eps=hp.eps, weight_decay=hp.weight_decay,
                        tau=hp.tau, lam=hp.lam, tdclm=hp.buffer_mode == 1, td_factor=hp.td_factor,
                        cautious=hp.cautious, bound_mode=hp.bound_mode, bound_ratio=hp.bound_ratio,
                        check_finite=kw.get("check_finite", True),
                        stochastic_rounding=kw.get("stochastic_rounding", True))


def one_step(hp: Hyper, shape, pdtype=torch.float32, gdtype=None, master=False, t=3, seed=1234, rng_seed=0,
             sr=True, device="cpu"):
    """One plan step on fresh random state; returns (param, state, reference result, status, counter)."""
    gen = torch.Generator().manual_seed(rng_seed)
    n = int(np.prod(shape)) if len(shape) else 1
    rows = shape[0] if len(shape) else 1
    x = torch.randn(shape, generator=gen)
    g = torch.randn(shape, generator=gen) * 0.1
    m = torch.randn(shape, generator=gen) * 0.01
    v = torch.rand(exp_avg_sq_length(n, rows, hp), generator=gen) * 0.01
    p = x.to(pdtype)
    grad = g.to(gdtype or pdtype)
    state = {"exp_avg": m.clone(), "exp_avg_sq": v.clone().reshape(shape) if hp.buffer_mode == 2 else v.clone()}
    x_old = x.clone() if master else p.float().clone()
    if master:
        state["master"] = x.clone()
    p, state = p.to(device), {k: v.to(device) for k, v in state.items()}
    if grad.dtype != p.dtype:
        if not hasattr(p, "grad_dtype"):
            pytest.skip("this torch refuses a gradient of another dtype than its parameter")
        p.grad_dtype = None  # gradients of another dtype than the parameter (a bf16 model's fp32 grads)
    p.grad = grad.to(device)
    counter = torch.tensor(float(t - 1), device=device)
    status = torch.zeros(4, dtype=torch.int32, device=device)
    plan = TritonStepPlan(torch.device(device), [GroupStep(options_of(hp, stochastic_rounding=sr), counter,
                                                          [TensorStep(p, state, "p", 0, seed=seed)])], status)
    scale = torch.tensor(hp.grad_scale, device=device) if hp.grad_scale != 1.0 else None
    assert plan.step(scale, None, False)
    ref = reference_step(hp, x_old.numpy().reshape(-1), m.numpy().reshape(-1), v.numpy(),
                         grad.float().numpy().reshape(-1), t, rows)
    p, state = p.cpu(), {k: v.cpu() for k, v in state.items()}
    return p, state, ref, status.cpu(), counter.cpu()


def check_against_reference(hp, p, state, ref, master):
    f = accuracy_factor(hp)
    assert_within_forward_error("m", state["exp_avg"].numpy().reshape(-1), ref.m, ref.scale_m, f)
    assert_within_forward_error("v", state["exp_avg_sq"].numpy().reshape(-1), ref.v, ref.scale_v, 1e-6)
    if master:
        assert_within_forward_error("x", state["master"].numpy().reshape(-1), ref.x, ref.scale_x, f)
    elif p.dtype == torch.float32:
        assert_within_forward_error("x", p.numpy().reshape(-1), ref.x, ref.scale_x, f)


MODES = {
    "clm": Hyper(),
    "tdclm_factored": Hyper(buffer_mode=1, td_factor="factored"),
    "tdclm_row": Hyper(buffer_mode=1, td_factor="row"),
    "tdclm_tensor": Hyper(buffer_mode=1, td_factor="tensor"),
}
OPTIONS = {
    "plain": {},
    "clip_lookahead": dict(tau=0.05, lam=0.3),
    "cautious_tensor_bound": dict(cautious=True, bound_mode=1, bound_ratio=1e-5),
    "element_bound_scaled": dict(bound_mode=2, bound_ratio=2e-5, grad_scale=1024.0),
}
