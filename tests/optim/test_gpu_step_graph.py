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


def run(monkeypatch, cached, in_place=False):
    """in_place: the gradients stay at their addresses and the lr is constant, so that from the
    third step on every step is one seen before (Note [a step seen before])."""
    monkeypatch.setenv("LUMINAV_CUDA_GRAPHS", "1" if cached else "0")
    fp32, bf16 = model()
    opt = LuminaV([dict(params=fp32, mode="clm", cautious=True),
                   dict(params=bf16, mode="tdclm", bound="tensor", bound_ratio=0.05)],
                  lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    ps = fp32 + bf16
    raised = []
    keep = []
    for step in range(STEPS):
        if step % 4 == 3 and not in_place:
            keep.append(torch.empty(4096 * (step + 1), device="cuda"))  # the next gradients land elsewhere
        for p, g in zip(ps, gradients(ps, step)):
            if in_place and p.grad is not None:
                p.grad.copy_(g)  # as after zero_grad(set_to_none=False) and a backward pass
            else:
                p.grad = g  # new tensors every step, as after zero_grad(set_to_none=True)
        if not in_place:
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


def test_steps_seen_before_equal_eager_steps_bit_for_bit(monkeypatch):
    eager, eager_raised = run(monkeypatch, cached=False, in_place=True)
    cached, cached_raised = run(monkeypatch, cached=True, in_place=True)
    assert len(eager_raised) == 1 and eager_raised[0][0] == NAN_STEP + 1, eager_raised
    assert cached_raised == eager_raised
    for i, (a, b) in enumerate(zip(cached, eager)):
        assert torch.equal(a, b), f"tensor {i} differs between steps launched again and eager launches"


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


# The cache's counters (StepGraphCache::Counters) reach the user through the host trace, which
# is read once per process: the steps run in a child. Equal results alone would also hold for a
# cache that always launched eagerly; the counters say the graph was built and then replayed.
COUNTED_STEPS = 12
_COUNTED_CHILD = """
import sys
import torch
from luminamoon.optim import LuminaV
in_place = sys.argv[1] == "in_place"
ps = [torch.nn.Parameter(torch.randn(s, device="cuda")) for s in ((512, 384), (384,), (65537,))]
opt = LuminaV(ps, lr=1e-3)
for step in range(int(sys.argv[2])):
    for p in ps:
        if in_place and p.grad is not None:
            p.grad.copy_(torch.randn_like(p))  # the same addresses every step
        else:
            p.grad = torch.randn_like(p)  # new gradients every step, as after zero_grad(set_to_none=True)
    opt.step()
torch.cuda.synchronize()
"""


def counters_after_steps(graphs: str, gradients: str = "new") -> dict[str, int]:
    import os
    import re
    import subprocess
    import sys
    env = dict(os.environ, LUMINAV_TRACE_HOST="1", LUMINAV_CUDA_GRAPHS=graphs)
    done = subprocess.run([sys.executable, "-c", _COUNTED_CHILD, gradients, str(COUNTED_STEPS)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = re.findall(r"step graphs: eager (\d+) built (\d+) replayed (\d+) nodes updated (\d+) unchanged (\d+)",
                       done.stderr)
    assert len(lines) == COUNTED_STEPS, done.stderr[-2000:]
    return dict(zip(("eager", "built", "replayed", "nodes_updated", "unchanged"), map(int, lines[-1])))


def test_the_cache_builds_one_graph_and_replays_it_from_then_on():
    c = counters_after_steps("1")
    # The first sighting of the step's topology is eager; the graph is built (once) and launched
    # on the second; every later step replays it.
    assert c["built"] == 1, c
    assert c["eager"] + c["replayed"] == COUNTED_STEPS, c
    assert c["replayed"] >= COUNTED_STEPS - 2, c


def test_with_the_cache_off_every_step_is_launched_eagerly():
    c = counters_after_steps("0")
    assert c == {"eager": COUNTED_STEPS, "built": 0, "replayed": 0, "nodes_updated": 0, "unchanged": 0}, c


def test_a_step_seen_before_is_launched_again_without_recording():
    """Note [a step seen before]: gradients at the same addresses and the same lr give the same
    inputs: from the third step on the graph is launched again without a recording."""
    c = counters_after_steps("1", "in_place")
    assert c["built"] == 1 and c["eager"] == 1, c
    assert c["unchanged"] == COUNTED_STEPS - 2, c
    assert c["replayed"] == COUNTED_STEPS - 1, c
