"""The cached step graph (Note [cached step graph] in src/optim/cuda/step_graph_cache.h): from
the second step of the same shape, LuminaV's CUDA step is one graph launch whose nodes are
updated where an argument changed. The reference is the same run with the cache off
(LUMINAV_CUDA_GRAPHS=0: every kernel launched eagerly): parameters and state must agree bit for
bit while gradients move to new addresses, the host lr changes every step, a gradient is
non-finite, and a tensor grows. Skipped without a CUDA GPU; run on the H200 by bench/gpu_suite.sh."""
from __future__ import annotations

import pytest
import torch

from luminamoon import optim
from luminamoon.optim import LuminaV, NonFiniteGradientError

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not any(n == "cuda" and ok for n, ok, _ in optim.backends()),
    reason="needs a CUDA GPU and the cuda backend")

FP32_SHAPES = [(512, 384), (384,), (1000, 7), (65537,)]
BF16_SHAPES = [(256, 512), (512,), (96, 1000)]
STEPS = 20
NAN_STEP = 11


def model(seed=0):
    gen = torch.Generator().manual_seed(seed)
    make = lambda s, dt: torch.nn.Parameter((torch.randn(s, generator=gen) * 0.3).to("cuda", dt))
    return [make(s, torch.float32) for s in FP32_SHAPES], [make(s, torch.bfloat16) for s in BF16_SHAPES]


def gradients(ps, step):
    gen = torch.Generator().manual_seed(7000 + step)
    out = [(torch.randn(p.shape, generator=gen) * 0.01).to("cuda", p.dtype) for p in ps]
    if step == NAN_STEP:
        out[1][5] = float("nan")
    return out


def run(monkeypatch, cached):
    monkeypatch.setenv("LUMINAV_CUDA_GRAPHS", "1" if cached else "0")
    fp32, bf16 = model()
    opt = LuminaV([dict(params=fp32, mode="clm", cautious=True),
                   dict(params=bf16, mode="tdclm", bound="tensor", bound_ratio=0.05)],
                  lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    ps = fp32 + bf16
    raised = []
    keep = []
    for step in range(STEPS):
        if step % 4 == 3:
            keep.append(torch.empty(4096 * (step + 1), device="cuda"))  # the next gradients land elsewhere
        for p, g in zip(ps, gradients(ps, step)):
            p.grad = g  # new tensors every step, as after zero_grad(set_to_none=True)
        for group in opt.param_groups:
            group["lr"] = 1e-3 * (0.97 ** step)  # what a scheduler writes: a host float
        try:
            opt.step()
        except NonFiniteGradientError as error:
            raised.append((step, str(error)))
        if step == NAN_STEP:
            torch.cuda.synchronize()  # the verdict is known at the next step in both runs
    try:
        opt.synchronize()
    except NonFiniteGradientError as error:
        raised.append((STEPS, str(error)))
    torch.cuda.synchronize()
    state = [v.clone() for p in ps for v in opt.state[p].values() if torch.is_tensor(v)]
    return [p.detach().clone() for p in ps] + state, raised


def test_cached_graph_steps_equal_eager_steps_bit_for_bit(monkeypatch):
    eager, eager_raised = run(monkeypatch, cached=False)
    cached, cached_raised = run(monkeypatch, cached=True)
    assert len(eager_raised) == 1 and eager_raised[0][0] == NAN_STEP + 1, eager_raised
    assert cached_raised == eager_raised
    assert len(cached) == len(eager)
    for i, (a, b) in enumerate(zip(cached, eager)):
        assert torch.equal(a, b), f"tensor {i} differs between the cached graph and eager launches"


def test_a_grown_tensor_gets_a_new_graph_and_the_same_result(monkeypatch):
    def steps(cached):
        monkeypatch.setenv("LUMINAV_CUDA_GRAPHS", "1" if cached else "0")
        out = []
        for n in (1000, 1000, 1000, 50000, 50000, 50000):  # a new topology after three steps
            p = torch.nn.Parameter(torch.linspace(-1, 1, n, device="cuda"))
            opt = LuminaV([p], lr=1e-2)
            for step in range(3):
                p.grad = torch.sin(torch.arange(n, device="cuda", dtype=torch.float32) * (step + 1))
                opt.step()
            torch.cuda.synchronize()
            out.append(p.detach().clone())
        return out

    assert all(torch.equal(a, b) for a, b in zip(steps(True), steps(False)))
