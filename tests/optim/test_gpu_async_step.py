"""The device-resident CUDA step in a user's loop (issue 13; Note [asynchronous errors] in
optim/torch_optimizer.py): no host wait, CUDA-graph capture, errors raised later without a sync, GradScaler.
Skipped without a CUDA GPU and the cuda backend; run on the H200 by bench/gpu_suite.sh."""
from __future__ import annotations

import time

import pytest
import torch

from luminamoon import optim
from luminamoon.optim import LuminaV, NonFiniteGradientError

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not any(n == "cuda" and ok for n, ok, _ in optim.backends()),
    reason="needs a CUDA GPU and the cuda backend")

# The asynchronous step's backends: the nvcc kernels, and the Triton AOT set (Note [triton-aot async step]).
NEEDS_TRITON_AOT = pytest.mark.skipif(not any(n == "triton-aot" and ok for n, ok, _ in optim.backends()),
                                      reason="triton-aot unavailable")

SHAPES = [(512, 384), (384,), (1000, 7), (3,), (65537,), (8192, 64)]


def params(dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((torch.randn(s, generator=gen) * 0.3).to("cuda", dtype)) for s in SHAPES]


def grads_for(step, dtype=torch.float32, scale=0.01):
    gen = torch.Generator().manual_seed(1000 + step)
    return [(torch.randn(s, generator=gen) * scale).to("cuda", dtype) for s in SHAPES]


def snapshot(ps, opt):
    out = [p.detach().clone() for p in ps]
    for p in ps:
        out += [v.clone() for v in opt.state[p].values() if torch.is_tensor(v)]
    return out


def sleep_cycles(seconds):
    # torch.cuda._sleep spins for a number of GPU clock cycles.
    rate = torch.cuda.get_device_properties(0).clock_rate if hasattr(torch.cuda.get_device_properties(0), "clock_rate") else 1_980_000
    return int(seconds * rate * 1000)


@pytest.mark.parametrize("backend,mode", [("cuda", "clm"), pytest.param("triton-aot", "tdclm", marks=NEEDS_TRITON_AOT)])
def test_step_returns_while_the_gpu_is_busy(backend, mode):
    ps = params()
    opt = LuminaV(ps, lr=1e-3, weight_decay=0.1, mode=mode, backend=backend)
    for p, g in zip(ps, grads_for(0)):
        p.grad = g
    opt.step()  # describes the step once
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(sleep_cycles(0.1))
    t0 = time.perf_counter()
    opt.step()
    host = time.perf_counter() - t0
    end.record()
    torch.cuda.synchronize()
    queued = start.elapsed_time(end) / 1e3
    assert queued > 0.05, f"the sleep kernel ran only {queued * 1e3:.1f} ms"
    assert host < 0.01, f"opt.step() took {host * 1e3:.1f} ms of host time with {queued * 1e3:.0f} ms queued"


@pytest.mark.parametrize("mode,extra", [("clm", {}), ("tdclm", dict(cautious=True, bound="tensor", bound_ratio=0.05))])
def test_graph_replays_equal_eager_steps_bit_for_bit_with_a_tensor_lr(mode, extra):
    lrs = [1e-3 * (1 + 0.1 * i) for i in range(20)]

    def run(graphed):
        ps = params()
        lr = torch.tensor(lrs[0], device="cuda")
        opt = LuminaV(ps, lr=lr, weight_decay=0.1, mode=mode, capturable=True, **extra)
        static_grads = [torch.zeros(s, device="cuda") for s in SHAPES]
        for p, g in zip(ps, static_grads):
            p.grad = g
        graph = None
        for step in range(20):
            for g, new in zip(static_grads, grads_for(step)):
                g.copy_(new)
            lr.fill_(lrs[step])  # what an LR scheduler does with a tensor lr
            if graph is not None:
                graph.replay()
                continue
            opt.step()
            if graphed:  # step 0 ran eagerly (it describes the step and creates the state)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):  # capturing runs nothing
                    opt.step()
        torch.cuda.synchronize()
        return snapshot(ps, opt), [int(opt.state[p]["step"]) for p in ps]

    eager, eager_steps = run(False)
    graphed, graph_steps = run(True)
    assert eager_steps == graph_steps == [20] * len(SHAPES)
    assert all(torch.equal(a, b) for a, b in zip(graphed, eager))


def stepped_once(backend="cuda"):
    """Parameters and a LuminaV that has taken one clean step (state exists, the step is described)."""
    ps = params()
    opt = LuminaV(ps, lr=1e-3, backend=backend)
    for p, g in zip(ps, grads_for(0)):
        p.grad = g
    opt.step()
    return ps, opt


@pytest.mark.parametrize("backend", ["cuda", pytest.param("triton-aot", marks=NEEDS_TRITON_AOT)])
def test_a_nan_writes_nothing_and_raises_at_the_next_step(backend):
    ps, opt = stepped_once(backend)
    before = snapshot(ps, opt)
    bad = grads_for(1)
    bad[4][123] = float("nan")
    for p, g in zip(ps, bad):
        p.grad = g
    opt.step()  # enqueued; the verdict is not known yet
    for p, g in zip(ps, grads_for(2)):
        p.grad = g
    torch.cuda.synchronize()
    with pytest.raises(NonFiniteGradientError) as info:
        opt.step()
    assert "parameter 4" in str(info.value)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(ps, opt)))
    opt.step()  # the error was raised once; the next step runs
    torch.cuda.synchronize()
    assert int(opt.state[ps[0]]["step"]) == 2


def test_steps_after_an_unseen_failure_write_nothing_and_sync_raises():
    ps, opt = stepped_once()
    before = snapshot(ps, opt)
    later = [grads_for(step) for step in range(1, 5)]  # made first: a host-to-device copy waits
    later[0][0][0, 0] = float("inf")
    torch.cuda._sleep(sleep_cycles(0.05))  # the host runs ahead of the verdict
    for grads in later:
        for p, g in zip(ps, grads):
            p.grad = g
        opt.step()
    with pytest.raises(NonFiniteGradientError):
        opt.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(ps, opt)))


def test_step_sync_raises_at_once_and_skip_nonfinite_counts_on_the_device():
    ps = params()
    opt = LuminaV(ps, lr=1e-3)
    bad = grads_for(0)
    bad[1][5] = float("nan")
    for p, g in zip(ps, bad):
        p.grad = g
    with pytest.raises(NonFiniteGradientError):
        opt.step(sync=True)
    skipper = LuminaV(params(), lr=1e-3, skip_nonfinite=True)
    for i, p in enumerate(skipper.param_groups[0]["params"]):
        p.grad = bad[i]
    for _ in range(3):
        skipper.step()
    assert skipper.skipped_steps == 3


def test_grad_scaler_with_fp16_parameters_skips_the_steps_torch_adamw_skips():
    torch.manual_seed(0)
    ours = params(torch.float16)
    ref = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt = LuminaV(ours, lr=1e-3, master_weights=False, stochastic_rounding=False)
    ref_opt = torch.optim.AdamW(ref, lr=1e-3, weight_decay=0.01, fused=True)
    scalers = [torch.amp.GradScaler("cuda", init_scale=2.0 ** 14, growth_interval=3) for _ in range(2)]
    skipped = [[], []]
    for step in range(12):
        gs = grads_for(step, torch.float16, scale=1.0)
        if step in (2, 7):
            gs[3][1] = float("inf")
        for k, (model, optimizer, scaler) in enumerate(((ours, opt, scalers[0]), (ref, ref_opt, scalers[1]))):
            scaler.scale(torch.ones((), device="cuda"))  # what scaler.scale(loss) would start
            loss_scale = scaler.get_scale()
            for p, g in zip(model, gs):
                p.grad = (g.float() * loss_scale).to(torch.float16)
            before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            skipped[k].append(scaler.get_scale() < before)
    assert skipped[0] == skipped[1] and sum(skipped[0]) >= 2
    assert [int(opt.state[p]["step"]) for p in ours] == [int(ref_opt.state[p]["step"]) for p in ref]
    # torch keeps fp16 moments for fp16 parameters, LuminaV fp32 ones: a few elements drift apart
    # by more than fp16 rounding, the bulk agrees.
    for a, b in zip(ours, ref):
        diff = (a.detach().float() - b.detach().float()).abs()
        assert diff.max() < 1e-2 and diff.mean() < 2e-4


def test_the_whole_optimizer_is_one_native_call_per_device():
    ps = params()
    opt = LuminaV([{"params": ps[:3], "mode": "tdclm"}, {"params": ps[3:], "lr": 1e-2}], lr=1e-3)
    for p, g in zip(ps, grads_for(0)):
        p.grad = g
    opt.step()
    assert opt.last_native_calls == 1
    torch.cuda.synchronize()


@pytest.mark.parametrize("td_factor", ["factored", "row"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tdclm_factors_on_the_device_match_the_scalar_backend(td_factor, dtype):
    """Note [factors on the device]: row/column sums, rho and vhat formed on the GPU."""
    shapes = [(512, 384), (384,), (1000, 7), (3,), (8192, 64), (4, 3, 5, 2)]
    gen = torch.Generator().manual_seed(7)
    cpu = [torch.nn.Parameter((torch.randn(s, generator=gen) * 0.3).to(dtype)) for s in shapes]
    gpu = [torch.nn.Parameter(p.detach().cuda()) for p in cpu]
    kw = dict(lr=1e-2, weight_decay=0.1, mode="tdclm", td_factor=td_factor)
    opt_cpu = LuminaV(cpu, backend="scalar", **kw)
    opt_gpu = LuminaV(gpu, **kw)
    for step in range(4):
        grads = [(torch.randn(s, generator=gen) * 0.01).to(dtype) for s in shapes]
        for p, q, g in zip(cpu, gpu, grads):
            p.grad, q.grad = g.clone(), g.cuda()
        opt_cpu.step()
        opt_gpu.step()
    torch.cuda.synchronize()
    for p, q in zip(cpu, gpu):
        a, b = opt_cpu.state[p], opt_gpu.state[q]
        torch.testing.assert_close(b["exp_avg_sq"].cpu(), a["exp_avg_sq"], rtol=1e-5, atol=0)
        xa = a.get("master", p.detach()).float()
        xb = b.get("master", q.detach()).float().cpu()
        torch.testing.assert_close(xb, xa, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["clm", "tdclm"])
def test_more_tensors_than_one_launch_takes_match_the_scalar_backend(mode):
    """Note [one launch for a model's tensors]: 150 fp32 tensors of one group, 140 of them 2-D (TD-CLM's
    factored tensors), are more than a launch's 128 slots: the batches' boundaries change nothing."""
    shapes = [(8, 16)] * 100 + [(33, 5)] * 40 + [(7,)] * 10
    gen = torch.Generator().manual_seed(13)
    cpu = [torch.nn.Parameter(torch.randn(s, generator=gen) * 0.3) for s in shapes]
    gpu = [torch.nn.Parameter(p.detach().cuda()) for p in cpu]
    kw = dict(lr=1e-2, weight_decay=0.1, mode=mode)
    opt_cpu = LuminaV(cpu, backend="scalar", **kw)
    opt_gpu = LuminaV(gpu, **kw)
    for _ in range(3):
        grads = [torch.randn(s, generator=gen) * 0.01 for s in shapes]
        for p, q, g in zip(cpu, gpu, grads):
            p.grad, q.grad = g.clone(), g.cuda()
        opt_cpu.step()
        opt_gpu.step()
    assert opt_gpu.last_native_calls == 1
    torch.cuda.synchronize()
    for i, (p, q) in enumerate(zip(cpu, gpu)):
        a, b = opt_cpu.state[p], opt_gpu.state[q]
        torch.testing.assert_close(b["exp_avg_sq"].cpu(), a["exp_avg_sq"], rtol=1e-5, atol=0, msg=f"tensor {i}")
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=2e-5, atol=1e-6, msg=f"tensor {i}")
