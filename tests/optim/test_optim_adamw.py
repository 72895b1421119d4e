"""CLM with default options is AdamW: luminamoon.optim.step against torch.optim.AdamW on CPU tensors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from luminamoon import optim
from luminav_reference import Hyper, assert_within_forward_error, normwise_relative_error, reference_step

N = 1001
HP = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def _ours(x, g, m, v, t, backend):
    optim.step(x, g, m, v, lr=HP["lr"], beta1=HP["betas"][0], beta2=HP["betas"][1], eps=HP["eps"],
               weight_decay=HP["weight_decay"], step=t, backend=backend)


@pytest.mark.parametrize("backend", ["scalar", "auto"])
def test_one_step_from_the_same_state_within_the_forward_error_bound(backend):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(N, generator=gen) * 0.5
    m = torch.randn(N, generator=gen) * 0.01
    v = (torch.rand(N, generator=gen) + 0.05) * 1e-4
    g = torch.randn(N, generator=gen) * 0.01
    t = 7
    p = x.clone().requires_grad_(True)
    adamw = torch.optim.AdamW([p], **HP)
    p.grad = g.clone()
    adamw.state[p] = {"step": torch.tensor(float(t - 1)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    adamw.step()

    xo, mo, vo = x.clone(), m.clone(), v.clone()
    _ours(xo, g, mo, vo, t, backend)
    # The scales s_i of the accuracy contract (reference values unused here).
    scales = reference_step(Hyper(lr=HP["lr"], weight_decay=HP["weight_decay"]), x.numpy(), m.numpy(),
                            v.numpy(), g.numpy(), t)
    state = adamw.state[p]
    assert_within_forward_error("exp_avg", mo.numpy(), state["exp_avg"].double().numpy(), scales.scale_m)
    assert_within_forward_error("exp_avg_sq", vo.numpy(), state["exp_avg_sq"].double().numpy(), scales.scale_v)
    assert_within_forward_error("param", xo.numpy(), p.detach().double().numpy(), scales.scale_x)
    assert not torch.equal(xo, x)  # it moved


@pytest.mark.parametrize("backend", ["scalar", "auto"])
def test_hundred_steps_within_normwise_relative_error(backend):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(N, generator=gen) * 0.5
    mean_grad = torch.randn(N, generator=gen) * 0.01
    p = x.clone().requires_grad_(True)
    adamw = torch.optim.AdamW([p], **HP)
    xo, mo, vo = x.clone(), torch.zeros(N), torch.zeros(N)
    for t in range(1, 101):
        g = mean_grad + torch.randn(N, generator=gen) * 0.01
        p.grad = g.clone()
        adamw.step()
        _ours(xo, g, mo, vo, t, backend)
    state = adamw.state[p]
    assert normwise_relative_error(xo.numpy(), p.detach().numpy()) <= 1e-5
    assert normwise_relative_error(mo.numpy(), state["exp_avg"].numpy()) <= 1e-5
    assert normwise_relative_error(vo.numpy(), state["exp_avg_sq"].numpy()) <= 1e-5
    assert normwise_relative_error(xo.numpy(), x.numpy()) > 1e-3  # the run moved the weights
