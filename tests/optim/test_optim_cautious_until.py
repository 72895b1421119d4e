"""LuminaV's cautious_until (Note [mask schedule] in torch_optimizer.py, beyond the spec): the cautious
mask for a group's first S step() calls, then the spec's update without it, against the float64
reference run with the mask for steps 1..S only; the count survives a state_dict round trip; bad
values are refused."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from luminamoon.optim import LuminaV
from luminav_reference import Hyper, normwise_relative_error, reference_step

SHAPE = (7, 13)  # factored: R = 7 rows, C = 13 columns
HP = Hyper(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, buffer_mode=1, td_factor="factored",
           tau=0.5, cautious=True)


def gradients(steps, seed=0):
    rng = np.random.default_rng(seed)
    mean = rng.standard_normal(SHAPE) * 0.01
    # a noisy gradient, so that u and g disagree in sign on many elements and the mask matters
    return [(mean + rng.standard_normal(SHAPE) * 0.02).astype(np.float32) for _ in range(steps)]


def reference(x0, grads, mask_steps):
    n = x0.size
    x, m = x0.reshape(-1).astype(np.float64), np.zeros(n)
    v = np.zeros(SHAPE[0] + SHAPE[1])  # row factors, then column factors
    for t, g in enumerate(grads, start=1):
        ref = reference_step(HP.with_(cautious=t <= mask_steps), x, m, v, g.reshape(-1), t, SHAPE[0])
        x, m, v = (a.astype(np.float32).astype(np.float64) for a in (ref.x, ref.m, ref.v))
    return x.reshape(SHAPE)


def optimizer(p, until):
    return LuminaV([p], lr=HP.lr, betas=(HP.beta1, HP.beta2), eps=HP.eps, weight_decay=HP.weight_decay,
                   mode="tdclm", td_factor="factored", tau=HP.tau, cautious=True, cautious_until=until)


@pytest.mark.parametrize("until", [0, 3, 10])
def test_the_mask_ends_after_its_steps(until):
    x0 = (np.random.default_rng(1).standard_normal(SHAPE) * 0.5).astype(np.float32)
    grads = gradients(6)
    p = torch.nn.Parameter(torch.from_numpy(x0.copy()))
    opt = optimizer(p, until)
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
    got = p.detach().numpy().astype(np.float64)
    assert normwise_relative_error(got, reference(x0, grads, until)) <= 1e-5
    # the schedule matters on this data: the mask on for all six steps, or never, is far from it
    for other in {0, 6} - {min(until, 6)}:
        assert normwise_relative_error(got, reference(x0, grads, other)) > 1e-4
    group = opt.param_groups[0]
    assert group["cautious"] is (until > 6)
    assert group["cautious_steps"] == min(until, 6)


def test_the_count_survives_a_checkpoint():
    x0 = (np.random.default_rng(2).standard_normal(SHAPE) * 0.5).astype(np.float32)
    grads = gradients(6, seed=3)
    p = torch.nn.Parameter(torch.from_numpy(x0.copy()))
    opt = optimizer(p, 4)
    for g in grads[:2]:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
    saved_param, saved_state = p.detach().clone(), copy.deepcopy(opt.state_dict())
    q = torch.nn.Parameter(saved_param.clone())
    resumed = optimizer(q, 4)
    resumed.load_state_dict(saved_state)
    assert resumed.param_groups[0]["cautious_steps"] == 2
    for g in grads[2:]:
        for param, o in ((p, opt), (q, resumed)):
            param.grad = torch.from_numpy(g.copy())
            o.step()
    assert torch.equal(p.detach(), q.detach())  # the resumed run switched the mask off at the same step
    assert normwise_relative_error(q.detach().numpy().astype(np.float64), reference(x0, grads, 4)) <= 1e-5


def test_a_failed_step_is_not_counted():
    p = torch.nn.Parameter(torch.ones(SHAPE))
    opt = optimizer(p, 2)
    p.grad = torch.full(SHAPE, float("nan"))
    with pytest.raises(Exception, match="NaN or Inf"):
        opt.step()
    assert opt.param_groups[0]["cautious_steps"] == 0 and opt.param_groups[0]["cautious"] is True


@pytest.mark.parametrize("bad", [-1, 2.5, True, "400"])
def test_a_bad_step_count_is_refused(bad):
    p = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match="cautious_until"):
        LuminaV([p], cautious=True, cautious_until=bad)
    opt = LuminaV([p], cautious=True)
    with pytest.raises(ValueError, match="cautious_until"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(2))], "cautious_until": bad})
    assert len(opt.param_groups) == 1  # the refused group is not kept


def test_an_end_without_a_mask_is_refused():
    with pytest.raises(ValueError, match="needs cautious=True"):
        LuminaV([torch.nn.Parameter(torch.ones(3))], cautious_until=400)
