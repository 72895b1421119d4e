"""LuminaV's step() keeps torch.optim's step contract without torch's per-call wrapper
(Note [lean step wrapper]): the hooks, their arguments and order, the profiler scope and the
LR scheduler's bookkeeping behave as they do for torch's own AdamW, the reference here."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.optim import optimizer as torch_optimizer

from luminamoon.optim import LuminaV


def _param():
    p = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 6))
    p.grad = torch.linspace(0.5, -0.5, 6)
    return p


def _pair():
    """LuminaV and torch's AdamW on equal parameters (the defaults give the same update)."""
    return LuminaV([_param()], lr=0.1, weight_decay=0.01), torch.optim.AdamW([_param()], lr=0.1, weight_decay=0.01)


def _recorded_calls(opt, call):
    seen = []
    handles = [
        torch_optimizer.register_optimizer_step_pre_hook(lambda o, a, k: seen.append(("global pre", len(a), dict(k)))),
        opt.register_step_pre_hook(lambda o, a, k: seen.append(("pre", len(a), dict(k)))),
        opt.register_step_post_hook(lambda o, a, k: seen.append(("post", len(a), dict(k)))),
        torch_optimizer.register_optimizer_step_post_hook(lambda o, a, k: seen.append(("global post", len(a), dict(k)))),
    ]
    try:
        call(opt)
    finally:
        for h in handles:
            h.remove()
    return seen


@pytest.mark.parametrize("call", [lambda o: o.step(), lambda o: o.step(lambda: 1.0)], ids=["plain", "closure"])
def test_hooks_run_in_torchs_order_with_torchs_arguments(call):
    ours, torchs = _pair()
    expected = _recorded_calls(torchs, call)
    assert [name for name, *_ in expected] == ["global pre", "pre", "post", "global post"]
    assert _recorded_calls(ours, call) == expected


def test_a_pre_hook_may_replace_the_arguments_and_a_removed_hook_is_gone():
    ours, _ = _pair()
    before = ours.param_groups[0]["params"][0].detach().clone()
    handle = ours.register_step_pre_hook(lambda o, a, k: ((a[0], lambda: 7.0), k))
    assert ours.step() == 7.0  # the closure the hook put in was run and its loss returned
    handle.remove()
    assert ours.step() is None
    assert not torch.equal(ours.param_groups[0]["params"][0].detach(), before)


def test_a_bad_pre_hook_result_raises_like_torch():
    ours, torchs = _pair()
    for opt in (ours, torchs):
        opt.register_step_pre_hook(lambda o, a, k: 3)
        with pytest.raises(RuntimeError, match="must return None or a tuple"):
            opt.step()


def test_the_profiler_sees_torchs_step_scope_name():
    ours, torchs = _pair()
    names = []
    for opt in (ours, torchs):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            opt.step()
        names.append({e.name for e in prof.events() if e.name.startswith("Optimizer.step#")})
    assert names == [{"Optimizer.step#LuminaV.step"}, {"Optimizer.step#AdamW.step"}]


def test_torch_does_not_wrap_the_step_again():
    LuminaV([_param()])
    assert LuminaV.step.hooked and not hasattr(LuminaV.step, "__wrapped__")


def test_an_lr_scheduler_sees_the_steps():
    ours, _ = _pair()
    scheduler = torch.optim.lr_scheduler.StepLR(ours, step_size=1, gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "lr_scheduler.step() before optimizer.step()" would fail here
        ours.step()
        scheduler.step()
    assert ours.param_groups[0]["lr"] == pytest.approx(0.05)


def test_the_plain_step_matches_adamw():
    ours, torchs = _pair()
    for _ in range(3):
        ours.step()
        torchs.step()
    torch.testing.assert_close(ours.param_groups[0]["params"][0], torchs.param_groups[0]["params"][0],
                               rtol=1e-6, atol=1e-7)
