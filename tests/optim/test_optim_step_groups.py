"""luminav_step_groups (include/luminav/luminav_groups.h) on the host, and the torch front end's
StepPlan (Note [step plan]): one call for every group, equal to per-group steps and to AdamW; the
description rebuilt when a gradient, a parameter or its storage changes."""
from __future__ import annotations

import ctypes as C

import numpy as np
import pytest
import torch

from luminamoon.optim import LuminaV
from luminav_ctypes import Async, Group, Hyperparams, StepStatus, Tensor, hyperparams, load_library

F32, TD_TENSOR = 0, 2


@pytest.fixture(scope="module")
def lib():
    lib = load_library()
    lib.luminav_step_groups.argtypes = [C.POINTER(Group), C.c_size_t, C.c_void_p, C.POINTER(Async)]
    lib.luminav_step_multi.argtypes = [C.POINTER(Hyperparams), C.POINTER(Tensor), C.c_size_t, C.c_void_p]
    lib.luminav_groups_workspace_bytes.restype = C.c_size_t
    lib.luminav_groups_workspace_bytes.argtypes = [C.POINTER(Group), C.c_size_t]
    return lib


def arrays(n, seed, bad=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    g = (rng.standard_normal(n) * 0.01).astype(np.float32)
    if bad:
        g[n // 2] = np.nan
    return [x, g, np.zeros(n, np.float32), np.zeros(n, np.float32)]


def tensor(a):
    x, g, m, v = a
    ptr = lambda arr: arr.ctypes.data  # noqa: E731
    return Tensor(ptr(x), ptr(g), ptr(m), ptr(v), None, x.size, 0, 0, F32, F32, 0, TD_TENSOR)


def groups_of(lib, specs, steps=None):
    """specs: [(hp, [arrays...])]; returns the ctypes groups and what keeps them alive."""
    keep, out = [], []
    for i, (hp, tensors) in enumerate(specs):
        descs = (Tensor * len(tensors))(*[tensor(a) for a in tensors])
        step = steps[i].ctypes.data if steps is not None else None
        keep += [hp, descs]
        out.append(Group(C.pointer(hp), descs, len(tensors), step, None, 0))
    return (Group * len(out))(*out), keep


def test_one_call_equals_one_call_per_group(lib):
    specs = [(hyperparams(lib, lr=1e-2, weight_decay=0.1), [arrays(300, 1), arrays(7, 2)]),
             (hyperparams(lib, lr=3e-3, buffer_mode=1, cautious=1), [arrays(1000, 3)]),
             (hyperparams(lib, lr=1e-3, bound_mode=2, bound_ratio=0.01), [arrays(65537, 4)])]
    expected = [[[a.copy() for a in t] for t in ts] for _, ts in specs]
    for (hp, _), ts in zip(specs, expected):
        descs = (Tensor * len(ts))(*[tensor(a) for a in ts])
        assert lib.luminav_step_multi(C.byref(hp), descs, len(ts), None) == 0
    groups, keep = groups_of(lib, specs)
    assert lib.luminav_step_groups(groups, len(specs), None, None) == 0, lib.luminav_last_error_message()
    for (_, ts), want in zip(specs, expected):
        for got, ref in zip(ts, want):
            for a, b in zip(got, ref):
                assert np.array_equal(a, b)


def test_a_bad_gradient_anywhere_writes_nothing_and_the_status_names_it(lib):
    specs = [(hyperparams(lib), [arrays(100, 1)]), (hyperparams(lib), [arrays(50, 2), arrays(20, 3, bad=True)])]
    before = [[a.copy() for a in t] for _, ts in specs for t in ts]
    groups, keep = groups_of(lib, specs)
    status = StepStatus()
    assert lib.luminav_step_groups(groups, 2, None, C.byref(Async(C.pointer(status), None, None, None, 0))) == 2
    assert status.verdict == 3  # 1 + the position of groups[1].tensors[1] over the call
    assert b"groups[1].tensors[1]" in lib.luminav_last_error_message()
    after = [t for _, ts in specs for t in ts]
    assert all(np.array_equal(a, b, equal_nan=True) for t0, t1 in zip(before, after) for a, b in zip(t0, t1))
    # skip_nonfinite: skipped and counted, still nothing written
    status = StepStatus()
    assert lib.luminav_step_groups(groups, 2, None, C.byref(Async(C.pointer(status), None, None, None, 1))) == 0
    assert (status.verdict, status.skipped) == (3, 1)
    assert all(np.array_equal(a, b, equal_nan=True) for t0, t1 in zip(before, after) for a, b in zip(t0, t1))


def test_found_inf_and_the_gradient_scale_on_the_host(lib):
    spec = [(hyperparams(lib, lr=1e-2), [arrays(64, 5)])]
    ref = [a.copy() for a in spec[0][1][0]]
    sigma = np.array([1024.0], np.float32)
    spec[0][1][0][1] *= 1024.0  # a scaled gradient
    groups, keep = groups_of(lib, spec)
    found = np.array([1.0], np.float32)
    status = StepStatus()
    before = [a.copy() for a in spec[0][1][0]]
    run = Async(C.pointer(status), None, sigma.ctypes.data, found.ctypes.data, 0)
    assert lib.luminav_step_groups(groups, 1, None, C.byref(run)) == 0
    assert status.skipped == 1 and all(np.array_equal(a, b) for a, b in zip(before, spec[0][1][0]))
    found[0] = 0.0
    assert lib.luminav_step_groups(groups, 1, None, C.byref(run)) == 0
    descs = (Tensor * 1)(tensor(ref))
    assert lib.luminav_step_multi(C.byref(spec[0][0]), descs, 1, None) == 0
    assert np.array_equal(spec[0][1][0][0], ref[0])  # 1024 is a power of two: unscaling is exact


def test_step_counters_advance_only_when_the_step_is_applied(lib):
    steps = [np.array([4.0], np.float32), np.array([0.0], np.float32)]
    specs = [(hyperparams(lib), [arrays(10, 1)]), (hyperparams(lib), [arrays(10, 2, bad=True)])]
    groups, keep = groups_of(lib, specs, steps)
    assert lib.luminav_step_groups(groups, 2, None, None) == 2
    assert [s[0] for s in steps] == [4.0, 0.0]
    specs[1][1][0][1][:] = 0.01
    assert lib.luminav_step_groups(groups, 2, None, None) == 0
    assert [s[0] for s in steps] == [5.0, 1.0]


def test_buffers_overlapping_across_groups_are_refused(lib):
    a = arrays(100, 1)
    b = [a[0][:50], *arrays(50, 2)[1:]]  # b's parameter is a's first half
    specs = [(hyperparams(lib), [a]), (hyperparams(lib), [b])]
    groups, keep = groups_of(lib, specs)
    assert lib.luminav_step_groups(groups, 2, None, None) == 1
    msg = lib.luminav_last_error_message()
    assert b"overlap" in msg and b"groups[0].tensors[0].param" in msg and b"groups[1].tensors[0].param" in msg


def test_workspace_size_needs_no_pointers(lib):
    hp = hyperparams(lib)
    descs = (Tensor * 2)(Tensor(None, None, None, None, None, 70000, 0, 0, 0, 0, 0, 0),
                         Tensor(None, None, None, None, None, 3, 0, 0, 0, 0, 0, 0))
    groups = (Group * 1)(Group(C.pointer(hp), descs, 2, None, None, 0))
    assert lib.luminav_groups_workspace_bytes(groups, 1) >= 3 * 64  # two tiles + one for the 3-element tensor
    assert lib.luminav_groups_workspace_bytes(None, 0) == 0


# ---- the torch front end's StepPlan ------------------------------------------------------------


def adamw_pair(shapes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ours = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    ref = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    return ours, ref


def step_both(ours, ref, opt, ref_opt, seed):
    gen = torch.Generator().manual_seed(seed)
    for p, q in zip(ours, ref):
        g = torch.randn(p.shape, generator=gen) * 0.01
        p.grad, q.grad = g.clone(), g.clone()  # new gradient tensors every step (set_to_none)
    opt.step()
    ref_opt.step()


def test_the_plan_survives_reallocated_gradients_and_follows_added_groups():
    shapes = [(33, 7), (7,), (1000,)]
    ours, ref = adamw_pair(shapes)
    opt = LuminaV(ours, lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1, foreach=False)
    step_both(ours, ref, opt, ref_opt, 1)
    plan = opt._plans
    for s in range(2, 5):
        step_both(ours, ref, opt, ref_opt, s)
    assert opt._plans is plan  # reallocated gradients are read, not re-described
    extra, extra_ref = adamw_pair([(5, 5)], seed=9)
    opt.add_param_group({"params": extra})
    ref_opt.add_param_group({"params": extra_ref})
    ours, ref = ours + extra, ref + extra_ref
    step_both(ours, ref, opt, ref_opt, 5)
    assert opt._plans is not plan and opt.last_native_calls == 1
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7)


def test_the_plan_follows_replaced_storage_and_a_dtype_change():
    ours, ref = adamw_pair([(16, 4)])
    opt = LuminaV(ours, lr=1e-2, master_weights=False)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, foreach=False)
    step_both(ours, ref, opt, ref_opt, 1)
    moved = ours[0].detach().clone() + 1.0
    ours[0].data = moved  # new storage: the old pointer must not be written
    ref[0].data = moved.clone()
    step_both(ours, ref, opt, ref_opt, 2)
    torch.testing.assert_close(ours[0].detach(), ref[0].detach(), rtol=1e-6, atol=1e-7)
    ours[0].data = ours[0].data.to(torch.bfloat16)  # a dtype change: described anew
    ours[0].grad = None
    gen = torch.Generator().manual_seed(3)
    ours[0].grad = (torch.randn(16, 4, generator=gen) * 0.01).to(torch.bfloat16)
    x = ours[0].detach().clone()
    opt.step()
    assert ours[0].dtype == torch.bfloat16 and not torch.equal(ours[0].detach(), x)


def test_a_gradient_appearing_on_an_excluded_parameter_is_stepped():
    a, b = torch.nn.Parameter(torch.ones(4)), torch.nn.Parameter(torch.ones(4))
    opt = LuminaV([a, b], lr=0.1)
    a.grad = torch.ones(4)
    opt.step()
    assert b not in opt.state
    b.grad = torch.ones(4)
    opt.step()
    assert int(opt.state[b]["step"]) == 1 and not torch.equal(b.detach(), torch.ones(4))


def test_a_host_step_lets_other_python_threads_run():
    # Note [the GIL in a step]: a plan computes with the GIL released, so a Python thread runs
    # while a long step does. Held, no Python line of another thread could run inside the step.
    import threading
    import time
    p = torch.nn.Parameter(torch.randn(1 << 25))
    p.grad = torch.randn(1 << 25)
    opt = LuminaV([p], lr=1e-3)
    opt.step()  # described: the plan exists
    assert opt._plans[0].native.release_gil
    seen, running, stop = [], threading.Event(), threading.Event()

    def note_times():
        running.set()
        while not stop.is_set():
            now = time.perf_counter()
            if not seen or now - seen[-1] > 1e-3:
                seen.append(now)

    worker = threading.Thread(target=note_times)
    worker.start()
    running.wait()
    try:
        windows = []
        for _ in range(3):
            t0 = time.perf_counter()
            opt.step()
            t1 = time.perf_counter()
            windows.append((t0 + 0.2 * (t1 - t0), t1 - 0.2 * (t1 - t0)))  # inside the native call
    finally:
        stop.set()
        worker.join()
    assert any(lo < t < hi for lo, hi in windows for t in seen), windows


# ---- Note [tensor reads through DLPack]: the plan's cheap reads must catch what the Python reads caught ----


def test_plain_tensors_are_read_through_the_dlpack_table_when_torch_has_one():
    p = torch.nn.Parameter(torch.randn(4))
    p.grad = torch.ones(4)
    opt = LuminaV([p], lr=0.1)
    opt.step()
    assert opt._plans[0].native.reads_through_dlpack == hasattr(torch.Tensor, "__dlpack_c_exchange_api__")


def _stepped_once():
    """A parameter of 8 floats after one step (its plan cached), and a copy of its values."""
    p = torch.nn.Parameter(torch.randn(8))
    p.grad = torch.full((8,), 0.01)
    opt = LuminaV([p], lr=0.1)
    opt.step()
    return p, opt, p.detach().clone()


def test_a_gradient_at_the_same_address_with_fewer_elements_is_refused():
    p, opt, before = _stepped_once()
    g = p.grad
    g.data = g.data[:4]  # the same address, half the elements: reading 8 would run past it
    assert p.grad.data_ptr() == g.data_ptr()
    with pytest.raises(ValueError, match="4 elements"):
        opt.step()
    assert torch.equal(p.detach(), before)


def test_a_gradient_at_the_same_address_with_another_dtype_is_refused():
    p, opt, before = _stepped_once()
    p.grad.data = p.grad.data.view(torch.float16)  # the same bytes read as 16 halves
    with pytest.raises(ValueError, match="dtype"):
        opt.step()
    assert torch.equal(p.detach(), before)


def test_a_gradient_at_the_same_address_with_other_strides_is_stepped_as_its_values():
    ours, ref = adamw_pair([(3, 5)])
    opt = LuminaV(ours, lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1, foreach=False)
    step_both(ours, ref, opt, ref_opt, 1)
    plan = opt._plans
    gen = torch.Generator().manual_seed(5)
    for _ in range(2):
        g = torch.randn(3, 5, generator=gen) * 0.01
        ours[0].grad, ref[0].grad = g, g.clone()
        opt.step()
        ref_opt.step()
        address = g.data_ptr()
        g.data = g.data.view(5, 3).t()  # the same address and shape, transposed strides
        assert ours[0].grad.data_ptr() == address and not ours[0].grad.is_contiguous()
        ref[0].grad = g.detach().clone()
        opt.step()
        ref_opt.step()
    assert opt._plans is plan  # read anew each step, never re-described
    torch.testing.assert_close(ours[0].detach(), ref[0].detach(), rtol=1e-6, atol=1e-7)


def test_a_parameter_view_of_the_same_storage_is_described_anew():
    p = torch.nn.Parameter(torch.randn(8))
    p.grad = torch.full((8,), 0.01)
    opt = LuminaV([p], lr=0.1, master_weights=False)
    opt.step()
    plan = opt._plans
    ptr = p.data_ptr()
    p.data = p.data[:4]  # the same pointer, fewer elements: the old description would write 8
    p.grad = torch.full((4,), 0.01)
    assert p.data_ptr() == ptr
    with pytest.raises(ValueError, match="holds 8 values"):  # described anew: the state of 8 does not fit 4
        opt.step()
    assert opt._plans is not plan


def test_a_gradient_of_a_tensor_subclass_is_read_through_torch():
    class Tagged(torch.Tensor):
        pass

    ours, ref = adamw_pair([(6,)])
    opt = LuminaV(ours, lr=1e-2)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, foreach=False)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        g = torch.randn(6, generator=gen) * 0.01
        ours[0].grad = g.clone().as_subclass(Tagged)
        ref[0].grad = g.clone()
        opt.step()
        ref_opt.step()
    torch.testing.assert_close(ours[0].detach(), ref[0].detach(), rtol=1e-6, atol=1e-7)


def test_the_host_trace_names_the_stages_of_a_step(tmp_path):
    # Note [host trace]: timed in memory, read after the step; off unless LUMINAV_TRACE_HOST is set
    # (read once per process: the traced step runs in a child, one torch import).
    import os
    import subprocess
    import sys
    if "LUMINAV_TRACE_HOST" not in os.environ:
        p = torch.nn.Parameter(torch.randn(4))
        p.grad = torch.ones(4)
        opt = LuminaV([p], lr=0.1)
        opt.step()
        assert opt._plans[0].native.last_trace == []
    script = tmp_path / "trace.py"
    script.write_text(
        "import torch\n"
        "from luminamoon.optim import LuminaV\n"
        "ps = [torch.nn.Parameter(torch.randn(16)) for _ in range(3)]\n"
        "opt = LuminaV(ps, lr=0.1)\n"
        "for _ in range(2):\n"
        "    for p in ps:\n"
        "        p.grad = torch.ones(16)\n"
        "    opt.step()\n"
        "print(repr(opt._plans[0].native.last_trace))\n")
    env = dict(os.environ, LUMINAV_TRACE_HOST="1")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    trace = eval(run.stdout.strip().splitlines()[-1])
    names = [name for name, _ in trace]
    assert names == ["plan refresh", "native call", "validate", "work lists", "backend choice", "reduce", "apply"]
    assert all(us >= 0 for _, us in trace)
    assert sum(us for _, us in trace[2:]) <= trace[1][1]  # the library's stages lie inside the native call
    assert run.stderr.count("luminav: plan refresh") == 2 and "[validate " in run.stderr
