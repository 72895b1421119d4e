"""backend="triton" on a CUDA GPU: the JIT kernels against the float64 reference, stochastic rounding
bit for bit against the nvcc kernels, no host synchronisation in a step, and a step captured in a
CUDA graph. Skipped without a GPU (the CPU suite runs the same kernels under TRITON_INTERPRET=1:
test_triton_interpreted.py). Run in its own pytest process: the interpreter's kernels and the
compiled ones cannot share one.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("TRITON_INTERPRET=1: this file runs the compiled kernels", allow_module_level=True)

from luminav_triton_cases import DTYPES, MODES, OPTIONS, check_against_reference, one_step  # noqa: E402

from luminamoon.optim import LuminaV, NonFiniteGradientError  # noqa: E402


# Each case compiles its own kernel variants (a second or two each): the CPU suite runs the whole
# matrix under the interpreter; here every mode and every option at least once.
GPU_CASES = [("clm", "plain"), ("clm", "cautious_tensor_bound"), ("clm", "element_bound_scaled"),
             ("tdclm_factored", "plain"), ("tdclm_factored", "cautious_tensor_bound"),
             ("tdclm_row", "clip_lookahead"), ("tdclm_tensor", "element_bound_scaled")]


@pytest.mark.parametrize("mode,option", GPU_CASES)
def test_jit_every_mode_and_option_against_reference(mode, option):
    hp = MODES[mode].with_(**OPTIONS[option])
    p, state, ref, status, counter = one_step(hp, (1000, 257), device="cuda")
    assert status.tolist() == [0, 0, 0, 0] and counter.item() == 3.0
    check_against_reference(hp, p, state, ref, master=False)


@pytest.mark.parametrize("td_factor", ["factored", "row"])
@pytest.mark.parametrize("shape", [(1000, 700), (4100, 100), (3, 9000)])
def test_jit_factor_tiles_against_reference_and_repeatable(td_factor, shape):
    """Note [Triton factor tiles] on the GPU: wide and narrow tiles, many chunks, strips and factor blocks
    (partial ones too), against the float64 reference; the same step from the same state twice gives
    the same bits (no sum depends on timing)."""
    hp = MODES[f"tdclm_{td_factor}"]
    p, state, ref, status, _ = one_step(hp, shape, device="cuda")
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=False)
    p2, state2, _, _, _ = one_step(hp, shape, device="cuda")
    assert torch.equal(p.view(torch.int32), p2.view(torch.int32))
    assert all(torch.equal(state[k].view(torch.int32), state2[k].view(torch.int32)) for k in state)


@pytest.mark.parametrize("pdtype,gdtype,mode", [("bf16", "bf16", "clm"), ("f16", "f16", "tdclm_factored"),
                                                ("bf16", "f32", "clm"), ("f32", "bf16", "tdclm_factored")])
def test_jit_16bit_against_reference(pdtype, gdtype, mode):
    master = pdtype != "f32"
    hp = MODES[mode].with_(tau=0.1, cautious=True)
    p, state, ref, status, _ = one_step(hp, (513, 130), DTYPES[pdtype], DTYPES[gdtype], master=master,
                                        device="cuda")
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=master)


def _pair(dtype, n=1 << 20, seed=0, **kw):
    torch.manual_seed(seed)
    init = torch.randn(n, device="cuda").to(dtype)
    a = torch.nn.Parameter(init.clone())
    b = torch.nn.Parameter(init.clone())
    return (a, LuminaV([a], lr=1e-3, seed=7, backend="triton", **kw)), (b, LuminaV([b], lr=1e-3, seed=7, **kw))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_stochastic_rounding_bit_identical_to_the_nvcc_kernels(dtype):
    """spec: stochastically rounded outputs agree bit for bit where the fp32 values agree."""
    (a, opt_a), (b, opt_b) = _pair(dtype)
    for step in range(3):
        g = torch.randn(a.shape, device="cuda").to(dtype)
        a.grad, b.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
    torch.cuda.synchronize()
    ma, mb = opt_a.state[a]["master"], opt_b.state[b]["master"]
    same = ma.view(torch.int32) == mb.view(torch.int32)
    assert same.float().mean().item() > 0.99, "the fp32 masters should mostly agree bit for bit"
    pa, pb = a.detach().view(torch.int16), b.detach().view(torch.int16)
    assert torch.equal(pa[same], pb[same])


def test_a_step_never_waits_for_the_host():
    (a, opt), _ = _pair(torch.float32, n=1 << 16, mode="tdclm", cautious=True)
    for _ in range(2):
        a.grad = torch.randn_like(a)
        opt.step()
    a.grad = torch.randn_like(a)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        opt.step()
        opt.step()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert opt.state[a]["step"].item() == 4.0


def test_a_step_captured_in_a_cuda_graph_replays_as_eager_steps():
    n = 1 << 18
    (a, opt_a), _ = _pair(torch.bfloat16, n=n, mode="tdclm")
    (b, opt_b), _ = _pair(torch.bfloat16, n=n, mode="tdclm")
    grads = [torch.randn(n, device="cuda").to(torch.bfloat16) for _ in range(4)]
    a.grad, b.grad = grads[0].clone(), grads[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compiles the kernels, builds the plan
        opt_a.step()
        opt_b.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt_b.step()
    for g in grads[1:]:
        a.grad.copy_(g)
        b.grad.copy_(g)
        opt_a.step()
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(a.detach().view(torch.int16), b.detach().view(torch.int16))
    assert torch.equal(opt_a.state[a]["exp_avg"], opt_b.state[b]["exp_avg"])
    assert opt_a.state[a]["step"].item() == opt_b.state[b]["step"].item() == 4.0


def test_nonfinite_gradient_is_reported_and_writes_nothing():
    (a, opt), _ = _pair(torch.float32, n=4096)
    a.grad = torch.randn_like(a)
    opt.step()
    before = a.detach().clone()
    a.grad[100] = float("nan")
    opt.step()  # asynchronous: the verdict comes with the next step or synchronize()
    with pytest.raises(NonFiniteGradientError):
        opt.synchronize()
    assert torch.equal(before, a.detach())
    assert opt.state[a]["step"].item() == 1.0


@pytest.mark.parametrize("sizes", [[1 << 16, 1000, 4099, 1 << 18, 48], [1 << 16, 1024, 4096, 1 << 18, 48]],
                         ids=["generic", "aligned"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_many_tensors_multi_tensor_kernels_match_the_nvcc_kernels(dtype, sizes):
    """Note [tensor tables]: several CLM tensors of one group share a finite-check and an apply launch
    (sizes a multiple of 16 and not: the ALIGNED and the generic kernels); the parameters agree with
    the nvcc kernels' (fp32 within the contract, bf16 bit for bit where the masters agree), and a
    step never waits for the host."""
    torch.manual_seed(4)
    inits = [torch.randn(n, device="cuda").to(dtype) for n in sizes]
    ours = [torch.nn.Parameter(x.clone()) for x in inits]
    theirs = [torch.nn.Parameter(x.clone()) for x in inits]
    opt_a = LuminaV(ours, lr=1e-3, seed=7, backend="triton")
    opt_b = LuminaV(theirs, lr=1e-3, seed=7)
    for step in range(3):
        for a, b in zip(ours, theirs):
            g = torch.randn(a.shape, device="cuda").to(dtype)
            a.grad, b.grad = g.clone(), g.clone()
        if step == 2:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            opt_a.step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        opt_b.step()
    torch.cuda.synchronize()
    for a, b in zip(ours, theirs):
        if dtype == torch.float32:
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        else:
            ma, mb = opt_a.state[a]["master"], opt_b.state[b]["master"]
            same = ma.view(torch.int32) == mb.view(torch.int32)
            assert same.float().mean().item() > 0.99
            assert torch.equal(a.detach().view(torch.int16)[same], b.detach().view(torch.int16)[same])
        assert opt_a.state[a]["step"].item() == 3.0


def test_replayed_steps_equal_launched_steps_through_address_changes_and_gradscaler_slots():
    """Note [replayed launches]: steps whose gradients keep their addresses replay the recorded launches;
    they write exactly what the same steps launched through the JIT write (here against a twin whose
    plan never replays), through a change of gradient addresses (a new record), a found_inf tensor
    new on every step (a slot) and one step GradScaler marks as skipped."""
    torch.manual_seed(11)
    sizes = [(1 << 16,), (1000,), (256, 64), (48,)]
    specs = [dict(params=None, mode="clm"), dict(params=None, mode="tdclm", cautious=True)]

    inits = [torch.randn(s, device="cuda") for s in sizes]

    def build():
        params = [torch.nn.Parameter(x.clone()) for x in inits]
        groups = [dict(specs[0], params=params[:2]), dict(specs[1], params=params[2:])]
        return params, LuminaV(groups, lr=1e-3, seed=7, backend="triton")

    ours, opt_a = build()
    theirs, opt_b = build()
    for a, b in zip(ours, theirs):
        a.grad, b.grad = torch.zeros_like(a), torch.zeros_like(b)
    opt_a.grad_scale = torch.full((1,), 1024.0, device="cuda")
    opt_b.grad_scale = opt_a.grad_scale.clone()
    replayed = 0
    for step in range(6):
        if step == 3:  # new gradient tensors (new addresses): tables rewritten, slots filled, replayed
            for a, b in zip(ours, theirs):
                a.grad, b.grad = torch.empty_like(a), torch.empty_like(b)
        for a, b in zip(ours, theirs):
            g = torch.randn(a.shape, device="cuda") * 1024.0
            a.grad.copy_(g)
            b.grad.copy_(g)
        skipped = step == 4
        opt_a.found_inf = torch.full((1,), 1.0 if skipped else 0.0, device="cuda")
        opt_b.found_inf = opt_a.found_inf.clone()
        plan_b = opt_b._plans[0].native if opt_b._plans else None
        if plan_b is not None:
            plan_b._record = None  # the twin launches every step through the JIT
        plan_a = opt_a._plans[0].native if opt_a._plans else None
        record = plan_a._record if plan_a is not None else None
        opt_a.step()
        opt_b.step()
        if record is not None and opt_a._plans[0].native._record is record:
            replayed += 1
    torch.cuda.synchronize()
    assert replayed >= 3, f"only {replayed} of 6 steps replayed"
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt_a.state[a][key], opt_b.state[b][key])
    assert opt_a.state[ours[0]]["step"].item() == opt_b.state[theirs[0]]["step"].item() == 5.0


@pytest.mark.parametrize("mode", ["clm", "tdclm"])
def test_steps_whose_slots_repeat_run_as_one_cuda_graph(mode):
    """Note [Triton step graphs]: from the third step whose slot values repeat (here the same gradient
    tensors, no GradScaler) the recorded launches run as one captured CUDA graph, with no host
    synchronisation in a replayed step; the parameters and state equal those of a twin whose every
    step is launched through the JIT. New gradient tensors: a CLM step reads its gradients from the
    batches' tables, so its graph stays valid; a TD-CLM step launches its factored gradients as
    arguments, so it replays the record's launches, then captures a graph for the new addresses."""
    torch.manual_seed(3)
    sizes = [(1 << 16,), (768, 64), (4099,), (48,), (300, 257), (256, 300)]  # TD-CLM: one factored batch, one alone
    inits = [torch.randn(s, device="cuda") for s in sizes]
    models, opts = [], []
    for _ in range(2):
        params = [torch.nn.Parameter(x.clone()) for x in inits]
        for p in params:
            p.grad = torch.zeros_like(p)
        models.append(params)
        opts.append(LuminaV(params, lr=1e-3, weight_decay=0.1, seed=7, backend="triton", mode=mode))
    captures = {2} if mode == "clm" else {2, 6}  # steps that capture (once per set of slot values)
    for step in range(8):
        if step == 5:
            for params in models:
                for p in params:
                    p.grad = torch.empty_like(p)
        grads = [torch.randn(s, device="cuda") for s in sizes]
        for params in models:
            for p, g in zip(params, grads):
                p.grad.copy_(g)
        if opts[1]._plans:
            opts[1]._plans[0].native._record = None  # the twin launches every step through the JIT
        checked = step >= 1 and step not in captures
        if checked:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            opts[0].step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        opts[1].step()
    torch.cuda.synchronize()
    graphs = opts[0]._plans[0].native.graphs
    assert graphs.replays == (6 if mode == "clm" else 5), graphs.replays
    assert opts[1]._plans[0].native.graphs.replays == 0
    for a, b in zip(*models):
        assert torch.equal(a, b)
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opts[0].state[a][key], opts[1].state[b][key])
    assert opts[0].state[models[0][0]]["step"].item() == 8.0


@pytest.mark.parametrize("mode", ["clm", "tdclm"])
def test_new_gradient_tensors_every_step_replay_without_a_host_sync(mode):
    """Note [tensor tables]: after zero_grad(set_to_none=True) every gradient is a new tensor, at an
    address the caching allocator chooses; the batches' gradient tables are rewritten (pinned,
    non-blocking), the gradients launched as arguments (TD-CLM's factored ones) are slots filled per
    replay (Note [replayed launches]), and the step's launches replayed, with no host
    synchronisation in any of these steps (set_sync_debug_mode("error") raises on one); the
    parameters and state equal those of a twin whose every step is launched through the JIT, and
    agree with the nvcc kernels."""
    torch.manual_seed(5)
    sizes = [(1 << 16,), (768, 64), (4099,), (48,), (1 << 18,), (300, 257), (256, 300)]
    inits = [torch.randn(s, device="cuda") for s in sizes]
    opts, models = [], []
    for backend in ("triton", "triton", "auto"):
        params = [torch.nn.Parameter(x.clone()) for x in inits]
        models.append(params)
        opts.append(LuminaV(params, lr=1e-3, weight_decay=0.1, seed=7, backend=backend, mode=mode))
    replayed, previous = 0, None
    for step in range(6):
        grads = [torch.randn(s, device="cuda") for s in sizes]
        # The last step's gradients held until this one is queued: the new ones take other blocks.
        held = [p.grad for params in models for p in params]
        for opt, params in zip(opts, models):
            opt.zero_grad(set_to_none=True)
            for p, g in zip(params, grads):
                p.grad = g.clone()
        plan = opts[0]._plans[0].native if opts[0]._plans else None
        record = plan._record if plan is not None else None
        if opts[1]._plans:
            opts[1]._plans[0].native._record = None  # the twin launches every step through the JIT
        if step >= 1:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            opts[0].step()
            opts[1].step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        opts[2].step()
        if record is not None and opts[0]._plans[0].native._record is record:
            replayed += 1
        addresses = [p.grad.data_ptr() for p in models[0]]
        assert addresses != previous  # what this test is about
        for batch in opts[0]._plans[0].native.groups[0].batches:
            assert batch.grad_addresses == [addresses[i] for i in batch.flat]
        previous = addresses
        del held
    torch.cuda.synchronize()
    assert replayed == 5, f"{replayed} of the 5 steps after the first replayed their launches"
    for a, b, c in zip(*models):
        assert torch.equal(a, b)
        assert torch.equal(opts[0].state[a]["exp_avg_sq"], opts[1].state[b]["exp_avg_sq"])
        torch.testing.assert_close(a, c, rtol=1e-6, atol=1e-7 if mode == "clm" else 1e-6)
    assert opts[0].state[models[0][0]]["step"].item() == 6.0
    if mode == "tdclm":  # a factored batch (Note [factored tables]) and a factored tensor launched on its own
        plan = opts[0]._plans[0].native
        assert plan._alone and any(b.kind == 3 and len(b.tensors) == 2 for b in plan.groups[0].batches)
