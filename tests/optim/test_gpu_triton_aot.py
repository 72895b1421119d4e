"""The triton-aot backend on a GPU: luminav_step_multi through the Triton AOT kernels (built on a
machine without a GPU) against the scalar backend and the float64 spec, stochastic rounding bit for
bit where the fp32 masters agree, the finite check, the refusals, and LUMINAV_FORCE_BACKEND.

Skips where torch sees no CUDA device or the backend cannot run (the reason is printed).
The kernels are LUMINAV_TRITON_AOT_DIR's, else the ones installed beside libluminav.
"""
from __future__ import annotations

import ctypes as C
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_gpu_cuda import (F32, BF16, OK, NONFINITE, State, backend_reason, check_against_scalar,  # noqa: E402
                           f32, hyperparams, load_library, scalar_options, step)
from luminav_ctypes import Options, Tensor, as_hyper  # noqa: E402
from luminav_reference import Hyper, accuracy_factor, assert_within_forward_error, reference_step  # noqa: E402

torch = pytest.importorskip("torch")
from luminamoon import optim  # noqa: E402
from luminamoon.optim import LuminaV  # noqa: E402
BACKEND_UNAVAILABLE = 3


@pytest.fixture(scope="module")
def lib():
    lib = load_library()
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    reason = backend_reason(lib, "triton-aot")
    if reason is not None:
        pytest.skip(f"triton-aot unavailable: {reason}")
    return lib


def aot_options() -> Options:
    return Options(backend=b"triton-aot", device_type=1, stream=torch.cuda.current_stream().cuda_stream)


@pytest.mark.parametrize("dtypes", [(F32, F32, False), (BF16, BF16, True)], ids=["f32", "bf16_master_sr"])
def test_many_tensors_match_the_scalar_backend(lib, dtypes):
    """Several tensors in one call (sizes around the 1024/4096-element programs; N a multiple of 16
    takes the _a16 kernels, Note [aligned variants]), each within the spec's forward error of the
    scalar backend; 16-bit parameters' bits equal where fp32 agrees."""
    param_dtype, grad_dtype, with_master = dtypes
    gen = torch.Generator().manual_seed(5 + param_dtype)
    hp = hyperparams(lib, step=9, weight_decay=0.05)
    befores = [State.random(gen, n, 2, param_dtype, grad_dtype, with_master, seed=77 + i)
               for i, n in enumerate([1, 1023, 1025, 4097, 100003, 65536, 12288])]
    hosts = [b.clone() for b in befores]
    gpus = [b.to(torch.device("cuda")) for b in befores]
    assert step(lib, hp, hosts, scalar_options()) == OK, lib.luminav_last_error_message()
    assert step(lib, hp, gpus, aot_options()) == OK, lib.luminav_last_error_message()
    assert lib.luminav_last_backend().decode().startswith("triton-aot:sm_"), lib.luminav_last_backend()
    for i, (b, g, h) in enumerate(zip(befores, gpus, hosts)):
        check_against_scalar(lib, hp, b, g, h, f"tensor {i}")


def test_a_nonfinite_gradient_is_counted_and_nothing_is_written(lib):
    gen = torch.Generator().manual_seed(8)
    hp = hyperparams(lib, step=2)
    before = [State.random(gen, n, 2, F32, F32, False) for n in (5000, 70001)]
    before[1].g[[3, 4096, 70000]] = float("nan")
    gpus = [b.to(torch.device("cuda")) for b in before]
    assert step(lib, hp, gpus, aot_options()) == NONFINITE
    message = lib.luminav_last_error_message().decode()
    assert "tensors[1]" in message and "3 of 70001" in message, message
    for b, g in zip(before, gpus):
        assert torch.equal(g.x.cpu(), b.x) and torch.equal(g.m.cpu(), b.m) and torch.equal(g.v.cpu(), b.v)


@pytest.mark.parametrize("change,needle", [(dict(cautious=1), "no kernel for cautious"),
                                           (dict(buffer_mode=1, lam=0.3), "no kernel for lam"),
                                           (dict(tau=0.5), "no kernel for tau")])
def test_options_outside_the_kernel_set_are_refused_before_a_launch(lib, change, needle):
    gen = torch.Generator().manual_seed(9)
    before = State.random(gen, 4096, change.get("buffer_mode", 2), F32, F32, False)
    gpu = before.to(torch.device("cuda"))
    assert step(lib, hyperparams(lib, **change), [gpu], aot_options()) == BACKEND_UNAVAILABLE
    assert needle in lib.luminav_last_error_message().decode()
    assert torch.equal(gpu.x.cpu(), before.x)


def test_host_memory_is_refused(lib):
    gen = torch.Generator().manual_seed(10)
    host = State.random(gen, 100, 2, F32, F32, False)
    assert step(lib, hyperparams(lib), [host], aot_options()) != OK
    assert "CUDA device memory" in lib.luminav_last_error_message().decode()


def test_force_backend_runs_luminav_step_and_the_standalone_engine_on_triton_aot(lib):
    """LUMINAV_FORCE_BACKEND=triton-aot: luminamoon.optim.step on CUDA tensors and the seed's
    luminav_triton_step_f32 on device pointers run the AOT kernels, as torch's AdamW moves the weights."""
    code = (
        "import ctypes as C, sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import test_gpu_cuda as t\n"
        "from luminamoon import optim\n"
        "n = 300001\n"
        "gen = torch.Generator().manual_seed(2)\n"
        "x = torch.randn(n, generator=gen); g = torch.randn(n, generator=gen) * 0.01\n"
        "w = torch.nn.Parameter(x.cuda().clone()); w.grad = g.cuda().clone()\n"
        "torch.optim.AdamW([w], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=False).step()\n"
        "xd, gd, md, vd = x.cuda(), g.cuda(), torch.zeros(n, device='cuda'), torch.zeros(n, device='cuda')\n"
        "optim.step(xd, gd, md, vd, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1)\n"
        "torch.cuda.synchronize()\n"
        "print('functional', optim.last_backend(), float((xd - w.detach()).abs().max() / w.detach().abs().max()))\n"
        "lib = t.load_library()\n"
        "e = lib.luminav_triton_engine_create()\n"
        "assert e, lib.luminav_last_error_message()\n"
        "xd, md, vd = x.cuda(), torch.zeros(n, device='cuda'), torch.zeros(n, device='cuda')\n"
        "p = lambda a: a.data_ptr()\n"
        "rc = lib.luminav_triton_step_f32(e, p(xd), p(gd), p(md), p(vd), None, None, n, 1e-3, 0.9, 0.999,"
        " 1e-8, 0.01, 0.0, 0.0, 2, 0, 0, 0.0, 1, 0)\n"
        "torch.cuda.synchronize()\n"
        "assert rc == 0, lib.luminav_last_error_message()\n"
        "print('engine', lib.luminav_triton_get_platform(e).decode(), lib.luminav_last_backend().decode(),"
        " float((xd - w.detach()).abs().max() / w.detach().abs().max()))\n"
    ) % str(Path(__file__).resolve().parent)
    env = dict(os.environ, LUMINAV_FORCE_BACKEND="triton-aot")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if "triton-aot' is unavailable" in out.stderr:
        pytest.skip(out.stderr.strip().splitlines()[-1])
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    label, err = lines["functional"].rsplit(" ", 1)  # the label: "triton-aot:sm_90 Triton 3.6.0"
    assert label.startswith("triton-aot:sm_") and float(err) <= 1e-6, lines
    platform, rest = lines["engine"].split(" ", 1)
    label, err = rest.rsplit(" ", 1)
    assert platform == "cuda" and label.startswith("triton-aot:sm_") and float(err) <= 1e-6, lines


# ---- TD-CLM (issue 18 session 5: Note [AOT TD-CLM set], Note [device finalize]) ----------------

TD_FACTOR = {"factored": 0, "row": 1, "tensor": 2}  # LUMINAV_TD_*
# (R, C): wide tiles with every hint (64 x 1024), wide with R and addresses off 16 (7 x 300), narrow
# aligned (512 x 48) and not (33 x 100), and a C = 1 tensor (CLM's per-element moments).
TD_SHAPES = [(64, 1024), (7, 300), (512, 48), (33, 100), (1000, 1)]


class TdState(State):
    """A TD-CLM tensor: exp_avg_sq in the form's layout (R + C, R or 1 floats)."""

    rows = 0
    td_factor = 0

    def struct(self) -> Tensor:
        t = super().struct()
        t.rows, t.td_factor = self.rows, self.td_factor
        return t

    def to(self, dev) -> "TdState":
        out = super().to(dev)
        out.__class__ = TdState
        out.rows, out.td_factor = self.rows, self.td_factor
        return out


def td_state(gen, rows: int, cols: int, form: str, dtypes, seed: int) -> TdState:
    param_dtype, grad_dtype, with_master = dtypes
    s = State.random(gen, rows * cols, 2, param_dtype, grad_dtype, with_master, seed=seed)
    length = 1 if form == "tensor" else rows if (form == "row" or cols == 1) else rows + cols
    s.v = ((torch.rand(length, generator=gen, dtype=torch.float64) + 0.05) * 1e-4).float()
    s.__class__ = TdState
    s.rows, s.td_factor = rows, TD_FACTOR[form]
    return s


def check_tdclm(hp, form: str, before: TdState, gpu: TdState, host: TdState, what: str):
    """GPU against the scalar backend under the spec's contract (x and m at 4e-6 s_i for factored),
    the scalar backend against the float64 spec, 16-bit bits equal where the fp32 masters agree."""
    b, a, r = before.numpy(), gpu.numpy(), host.numpy()
    h = as_hyper(hp).with_(td_factor=form)
    cols = b["g"].size // before.rows
    factor = accuracy_factor(h) if cols > 1 else 1e-6
    x_old = b["master"] if b["master"] is not None else b["x"]
    ref = reference_step(h, x_old, b["m"], b["v"], b["g"], int(hp.step), rows=before.rows)
    assert_within_forward_error(f"{what} m", a["m"], r["m"], ref.scale_m, factor)
    assert_within_forward_error(f"{what} second moment", a["v"], r["v"], ref.scale_v)
    assert_within_forward_error(f"{what} scalar second moment", r["v"], ref.v, ref.scale_v)
    assert_within_forward_error(f"{what} scalar m", r["m"], ref.m, ref.scale_m, factor)
    if a["master"] is not None:
        assert_within_forward_error(f"{what} master", a["master"], r["master"], ref.scale_x, factor)
        same = a["master"] == r["master"]
        assert np.array_equal(a["x_bits"][same], r["x_bits"][same]), f"{what}: 16-bit bits differ where fp32 agrees"
    else:
        assert_within_forward_error(f"{what} param", a["x"], r["x"], ref.scale_x, factor)
    assert_within_forward_error(f"{what} scalar x", r["master"] if r["master"] is not None else r["x"], ref.x,
                                ref.scale_x, factor)


@pytest.mark.parametrize("form", list(TD_FACTOR))
@pytest.mark.parametrize("dtypes", [(F32, F32, False), (BF16, BF16, True)], ids=["f32", "bf16_master_sr"])
def test_tdclm_matches_the_scalar_backend_and_the_float64_spec(lib, form, dtypes):
    """TD-CLM factored / row / tensor through luminav_step_multi on triton-aot: every tile shape and
    alignment the launcher chooses between, three steps (the factors carried between them)."""
    gen = torch.Generator().manual_seed(40 + TD_FACTOR[form] + 3 * dtypes[0])
    states = [td_state(gen, r, c, form, dtypes, seed=11 + i) for i, (r, c) in enumerate(TD_SHAPES)]
    hosts = [s.clone() for s in states]
    gpus = [s.to(torch.device("cuda")) for s in states]
    for t in (1, 2, 3):
        hp = hyperparams(lib, buffer_mode=1, step=t, weight_decay=0.05)
        befores = [g.to(torch.device("cpu")) for g in gpus]
        hosts = [b.clone() for b in befores]
        assert step(lib, hp, hosts, scalar_options()) == OK, lib.luminav_last_error_message()
        assert step(lib, hp, gpus, aot_options()) == OK, lib.luminav_last_error_message()
        assert lib.luminav_last_backend().decode().startswith("triton-aot:sm_"), lib.luminav_last_backend()
        for i, (b, g, h) in enumerate(zip(befores, gpus, hosts)):
            check_tdclm(hp, form, b, g, h, f"step {t} tensor {i} {TD_SHAPES[i]}")


@pytest.mark.parametrize("form", ["factored", "row", "tensor"])
def test_tdclm_nonfinite_gradient_writes_nothing(lib, form):
    """A NaN in the second tensor: NONFINITE_GRAD with its exact count, and no parameter, moment or
    factor of any tensor written (the device finalize kept s and the factors off exp_avg_sq)."""
    gen = torch.Generator().manual_seed(50 + TD_FACTOR[form])
    before = [td_state(gen, 64, 1024, form, (F32, F32, False), 1), td_state(gen, 33, 100, form, (F32, F32, False), 2)]
    before[1].g[[5, 3299]] = float("nan")
    gpus = [b.to(torch.device("cuda")) for b in before]
    assert step(lib, hyperparams(lib, buffer_mode=1, step=4), gpus, aot_options()) == NONFINITE
    message = lib.luminav_last_error_message().decode()
    assert "tensors[1]" in message and "2 of 3300" in message, message
    for b, g in zip(before, gpus):
        assert torch.equal(g.x.cpu(), b.x) and torch.equal(g.m.cpu(), b.m) and torch.equal(g.v.cpu(), b.v)


def test_tdclm_split_entry_points_are_refused(lib):
    """luminav_reduce of TD-CLM on triton-aot: refused with the reason (its finalize is the device's)."""
    from luminav_ctypes import Partials
    gen = torch.Generator().manual_seed(60)
    gpu = td_state(gen, 64, 1024, "tensor", (F32, F32, False), 1).to(torch.device("cuda"))
    out = Partials()
    code = lib.luminav_reduce(C.byref(hyperparams(lib, buffer_mode=1, step=1)), C.byref(gpu.struct()), 0, None,
                              C.byref(out), C.byref(aot_options()))
    assert code == BACKEND_UNAVAILABLE, code
    assert "whole steps only" in lib.luminav_last_error_message().decode()


def test_standalone_engine_runs_tdclm_on_triton_aot():
    """The seed's C API (luminav_triton_step_f32, TD-CLM = td_factor tensor) with
    LUMINAV_FORCE_BACKEND=triton-aot: device pointers run the AOT TD-CLM kernels, and x, m and s are
    within the spec's 1e-6 s_i of the float64 spec (s formed on the device from the old s)."""
    code = (
        "import sys, torch, numpy as np\n"
        "sys.path.insert(0, %r)\n"
        "sys.path.insert(0, %r)\n"
        "import test_gpu_cuda as t\n"
        "from luminav_reference import Hyper, reference_step, assert_within_forward_error\n"
        "f = t.f32  # the standalone API's float arguments: the reference gets the same values\n"
        "hyper = Hyper(lr=f(1e-3), beta1=f(0.9), beta2=f(0.999), eps=f(1e-8), weight_decay=f(0.01),"
        " buffer_mode=1, td_factor='tensor')\n"
        "n = 300000\n"
        "gen = torch.Generator().manual_seed(3)\n"
        "x = torch.randn(n, generator=gen); g = torch.randn(n, generator=gen) * 0.01\n"
        "m = torch.randn(n, generator=gen) * 0.001; s = torch.tensor([2e-5])\n"
        "lib = t.load_library()\n"
        "e = lib.luminav_triton_engine_create()\n"
        "assert e, lib.luminav_last_error_message()\n"
        "p = lambda a: a.data_ptr()\n"
        "dx, dg, dm, ds = x.cuda(), g.cuda(), m.cuda(), s.cuda()\n"
        "for step in (1, 2):\n"
        "    x0, m0, s0 = dx.cpu().numpy(), dm.cpu().numpy(), ds.cpu().numpy()\n"
        "    rc = lib.luminav_triton_step_f32(e, p(dx), p(dg), p(dm), p(ds), None, None, n, 1e-3, 0.9, 0.999,"
        " 1e-8, 0.01, 0.0, 0.0, 1, 0, 0, 0.0, step, 0)\n"
        "    torch.cuda.synchronize()\n"
        "    assert rc == 0, lib.luminav_last_error_message()\n"
        "    ref = reference_step(hyper, x0, m0, s0, g.numpy(), step)\n"
        "    assert_within_forward_error('x', dx.cpu().numpy(), ref.x, ref.scale_x)\n"
        "    assert_within_forward_error('m', dm.cpu().numpy(), ref.m, ref.scale_m)\n"
        "    assert_within_forward_error('s', ds.cpu().numpy(), ref.v, ref.scale_v)\n"
        "print('engine', lib.luminav_triton_get_platform(e).decode(), lib.luminav_last_backend().decode())\n"
    ) % (str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1]))
    env = dict(os.environ, LUMINAV_FORCE_BACKEND="triton-aot")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if "triton-aot' is unavailable" in out.stderr:
        pytest.skip(out.stderr.strip().splitlines()[-1])
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("engine cuda triton-aot:sm_"), line


# ---- luminav_step_groups on triton-aot (Note [triton-aot async step]) ---------------------------

ASYNC_SHAPES = [(512, 384), (384,), (1000, 7), (3,), (65537,), (256, 48)]


def async_params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((torch.randn(s, generator=gen) * 0.3).cuda()) for s in ASYNC_SHAPES]


def async_grads(step):
    gen = torch.Generator().manual_seed(1000 + step)
    return [(torch.randn(s, generator=gen) * 0.01).cuda() for s in ASYNC_SHAPES]


def run_steps(opt, ps, steps, first=0):
    for step in range(first, first + steps):
        for p, g in zip(ps, async_grads(step)):
            p.grad = g
        opt.step()


@pytest.mark.parametrize("mode", ["clm", "tdclm"])
def test_the_torch_optimizer_on_triton_aot_matches_the_cuda_backend_and_torch_adamw(lib, mode):
    """LuminaV(backend="triton-aot") through luminav_step_groups, two param groups (their own lr
    and weight decay; TD-CLM's matrices factored, its vectors CLM), five steps: within 1e-6 of the nvcc
    kernels' result (relative to the largest weight), and CLM within the same of torch's AdamW."""
    runs = {}
    for backend in ("triton-aot", "cuda", "torch"):
        ps = async_params()
        groups = [dict(params=ps[:3], lr=1e-3, weight_decay=0.1), dict(params=ps[3:], lr=3e-3, weight_decay=0.0)]
        if backend == "torch":
            if mode != "clm":
                continue
            opt = torch.optim.AdamW(groups, betas=(0.9, 0.999), eps=1e-8, foreach=False)
        else:
            opt = LuminaV(groups, betas=(0.9, 0.999), eps=1e-8, mode=mode, backend=backend)
        run_steps(opt, ps, 5)
        torch.cuda.synchronize()
        runs[backend] = [p.detach().clone() for p in ps]
        if backend == "triton-aot":
            assert optim.last_backend().startswith("triton-aot:sm_"), optim.last_backend()
            assert [int(opt.state[p]["step"]) for p in ps] == [5] * len(ps)
    for other in [b for b in runs if b != "triton-aot"]:
        for i, (a, b) in enumerate(zip(runs["triton-aot"], runs[other])):
            err = float((a - b).abs().max() / b.abs().max())
            assert err <= 1e-6, f"{mode} parameter {i}: triton-aot against {other}: {err:.2e}"


@pytest.mark.parametrize("mode", ["clm", "tdclm"])
def test_an_aot_step_captured_in_a_cuda_graph_replays_as_eager_steps(lib, mode):
    """Note [triton-aot capture]: after one eager step with its workspace (on a side stream, as
    torch's docs warm up), a step captured with torch.cuda.graph replays as eager steps do: the
    parameters within 1e-6 of an optimizer stepping eagerly on the same gradients, the step counts
    advanced by the replays. An eager step after the replays sets every host word again, so a new lr
    between them is honoured, against the cuda backend given the same lr sequence."""
    runs = {}
    for how in ("eager", "graph", "cuda"):
        ps = async_params(seed=3)
        opt = LuminaV(ps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, mode=mode,
                      backend="cuda" if how == "cuda" else "triton-aot")
        grads = [torch.zeros_like(p) for p in ps]
        for p, g in zip(ps, grads):
            p.grad = g
        def load(step):
            for g, new in zip(grads, async_grads(step)):
                g.copy_(new)
        load(0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up step: the workspace's scratch allocated here
            opt.step()
        torch.cuda.current_stream().wait_stream(side)
        if how == "graph":
            graph = torch.cuda.CUDAGraph()
            load(1)
            with torch.cuda.graph(graph):
                opt.step()  # captured only: its first run is the replay below
            for step in range(1, 5):
                load(step)
                graph.replay()
        else:
            for step in range(1, 5):
                load(step)
                opt.step()
        for group in opt.param_groups:  # an eager step with a new lr after the replays
            group["lr"] = 5e-4
        load(5)
        opt.step()
        torch.cuda.synchronize()
        runs[how] = [p.detach().clone() for p in ps]
        assert [int(opt.state[p]["step"]) for p in ps] == [6] * len(ps), how
    for other in ("eager", "cuda"):
        for i, (a, b) in enumerate(zip(runs["graph"], runs[other])):
            err = float((a - b).abs().max() / b.abs().max())
            assert err <= 1e-6, f"{mode} parameter {i}: graph against {other}: {err:.2e}"


def test_optimizers_beyond_the_kept_workspaces_still_step_exactly(lib):
    """Ten optimizers over ten workspaces (more than the eight uncaptured ones whose scratch is kept,
    so the first one's is freed and made again at its second step, unless earlier tests' workspaces
    went first: the freeing itself is not observed here): that second step's result equals an
    optimizer's that stepped twice alone, bit for bit."""
    def two_steps(opts_between):
        ps = async_params(seed=9)
        opt = LuminaV(ps, lr=1e-3, mode="tdclm", backend="triton-aot")
        run_steps(opt, ps, 1)
        others = []
        for k in range(opts_between):
            qs = async_params(seed=20 + k)
            others.append(LuminaV(qs, lr=1e-3, mode="tdclm", backend="triton-aot"))
            run_steps(others[-1], qs, 1)
        run_steps(opt, ps, 1, first=1)
        torch.cuda.synchronize()
        return [p.detach().clone() for p in ps]
    alone, crowded = two_steps(0), two_steps(9)
    for a, b in zip(alone, crowded):
        assert torch.equal(a, b)


# The step's host time with work queued and a NaN's error at the next step: test_gpu_async_step.py, on
# both backends.


def test_what_the_aot_set_lacks_is_refused_with_its_name_and_nothing_written(lib):
    ps = async_params()
    for p, g in zip(ps, async_grads(0)):
        p.grad = g
    before = [p.detach().clone() for p in ps]
    opt = LuminaV(ps, lr=1e-3, backend="triton-aot", skip_nonfinite=True)
    with pytest.raises(Exception, match="skip_nonfinite"):
        opt.step()
    torch.cuda.synchronize()
    assert all(torch.equal(p.detach(), b) for p, b in zip(ps, before))


# ---- many tensors per launch (Note [triton-aot batches]) ----------------------------------------

# A small transformer's tensors: factored matrices of the wide tile (C >= 128) and of the narrow one,
# norms and biases (CLM in both modes), sizes and offsets on and off 16 elements.
BATCH_SHAPES = [(256, 192), (192, 192), (512, 192), (192, 512), (192,), (192,), (96, 8), (40, 24), (33,), (7, 130),
                (1000,), (5,)]


def batch_params(dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((torch.randn(s, generator=gen) * 0.3).to(dtype).cuda()) for s in BATCH_SHAPES]


def batch_grads(step, dtype):
    gen = torch.Generator().manual_seed(500 + step)
    return [(torch.randn(s, generator=gen) * 0.01).to(dtype).cuda() for s in BATCH_SHAPES]


def batch_groups(ps):
    """Two groups as a training script makes them: matrices with weight decay, vectors without."""
    return [dict(params=[p for p in ps if p.dim() == 2], weight_decay=0.1),
            dict(params=[p for p in ps if p.dim() == 1], weight_decay=0.0)]


def assert_close_weights(runs, ps_of, what):
    """Every run's fp32 weights (the masters of bf16 parameters) within 1e-6 of the first's, relative
    to the largest weight."""
    names = list(runs)
    for other in names[1:]:
        for i, (a, b) in enumerate(zip(ps_of(runs[names[0]]), ps_of(runs[other]))):
            err = float((a - b).abs().max() / b.abs().max())
            assert err <= 1e-6, f"{what} tensor {i} {BATCH_SHAPES[i]}: {names[0]} against {other}: {err:.2e}"


@pytest.mark.parametrize("mode", ["clm", "tdclm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16_master"])
def test_the_batched_aot_step_matches_the_triton_jit_and_the_cuda_backend(lib, mode, dtype):
    """Twelve tensors in two groups, five steps, new gradient tensors at every step (their addresses
    move, so the gradient table is rewritten), one step with two matrices left out (grad None: the
    plan's key changes, the tables are made again) and back: triton-aot within 1e-6 of the Triton
    JIT (the same multi-tensor kernels, launched from Python) and of the nvcc kernels."""
    runs = {}
    for backend in ("triton-aot", "triton", "cuda"):
        ps = batch_params(dtype)
        opt = LuminaV(batch_groups(ps), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, mode=mode, backend=backend)
        for step in range(5):
            for i, (p, g) in enumerate(zip(ps, batch_grads(step, dtype))):
                p.grad = None if step == 2 and i in (1, 6) else g
            opt.step()
        torch.cuda.synchronize()
        runs[backend] = (ps, opt)
        if backend == "triton-aot":
            assert optim.last_backend().startswith("triton-aot:sm_"), optim.last_backend()
    def weights(run):
        ps, opt = run
        return [opt.state[p]["master"] if "master" in opt.state[p] else p.detach() for p in ps]
    assert_close_weights(runs, weights, f"{mode} {dtype}")


def test_a_batched_step_takes_a_launch_per_stage_not_one_per_tensor(lib):
    """The kernels of one TD-CLM step of the twelve tensors (torch.profiler): the multi-tensor kernels
    step the matrices of each sums tile and the vectors together, so the step takes fewer launches
    than it has tensors (one at a time: 4 per factored matrix, 2 per vector)."""
    from torch.profiler import ProfilerActivity, profile
    ps = batch_params(torch.float32)
    opt = LuminaV(batch_groups(ps), lr=1e-3, mode="tdclm", backend="triton-aot")
    for p, g in zip(ps, batch_grads(0, torch.float32)):
        p.grad = g
    opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        opt.step()
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    multi = [k for k in kernels if "multi" in k]
    # prepare (a group each), the 5 wide-tile matrices' 4 stages, the 2 narrow-tile ones' 4, the 5
    # vectors' finite check and apply, commit, advance (a group each): 15, against 7 x 4 + 5 x 3
    # one at a time
    assert len(multi) == 10, kernels
    assert len(kernels) == 15, kernels


def test_two_captures_over_their_own_gradients_each_replay_their_own(lib):
    """Note [triton-aot batches]: two graphs of one optimizer, each captured over gradient tensors of its
    own (each copies its gradient table from a pinned slot of its own), replayed alternately: each
    replay reads its own gradients, within 1e-6 of eager steps given the same gradient sequence."""
    runs = {}
    for how in ("graph", "eager"):
        ps = batch_params(torch.float32, seed=4)
        opt = LuminaV(batch_groups(ps), lr=1e-3, mode="tdclm", backend="triton-aot")
        sets = [[torch.zeros_like(p) for p in ps] for _ in range(2)]
        def use(k, step):
            for p, buf, g in zip(ps, sets[k], batch_grads(step, torch.float32)):
                buf.copy_(g)
                p.grad = buf
        use(0, 0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up step
            opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        if how == "graph":
            for k in range(2):
                use(k, 0)
                graphs.append(torch.cuda.CUDAGraph())
                with torch.cuda.graph(graphs[-1]):
                    opt.step()
        for step in range(1, 7):
            use(step % 2, step)
            if how == "graph":
                graphs[step % 2].replay()
            else:
                opt.step()
        torch.cuda.synchronize()
        runs[how] = (ps, opt)
    assert_close_weights(runs, lambda run: [p.detach() for p in run[0]], "two captures")


def test_a_capture_before_any_eager_step_is_refused_and_writes_nothing(lib):
    """Note [triton-aot capture]: a workspace's first step allocates its scratch, which a capture
    forbids: refused with the reason (run a warm-up step), the parameters untouched."""
    ps = batch_params(torch.float32, seed=6)
    opt = LuminaV(batch_groups(ps), lr=1e-3, mode="tdclm", backend="triton-aot")
    for p, g in zip(ps, batch_grads(0, torch.float32)):
        p.grad = g
    before = [p.detach().clone() for p in ps]
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(Exception, match="warm-up"):
        with torch.cuda.graph(graph):
            opt.step()
    torch.cuda.synchronize()
    assert all(torch.equal(p.detach(), b) for p, b in zip(ps, before))


# ---- a C program on the AOT kernels (issue 18: "the C API driving the AOT kernels from a C program") --------

C_AOT_PROGRAM = r"""
/* C99, no Python in the process: the CUDA driver (dlopen, as a native engine would have it), device memory,
 * two CLM steps of luminav_triton_step_f32 on device pointers; the backend comes from LUMINAV_FORCE_BACKEND.
 * argv[1]: n, then x, g as float32; argv[2]: x, m, v after step 1, then after step 2. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <luminav/luminav.h>
#include <luminav_triton_standalone.h>

typedef int (*init_fn)(unsigned);
typedef int (*device_fn)(int*, int);
typedef int (*retain_fn)(void**, int);
typedef int (*set_fn)(void*);
typedef int (*alloc_fn)(unsigned long long*, size_t);
typedef int (*htod_fn)(unsigned long long, const void*, size_t);
typedef int (*dtoh_fn)(void*, unsigned long long, size_t);
typedef int (*sync_fn)(void);

#define NEED(name, type, var) type var = (type)dlsym(cuda, name); if (!var) { printf("no %s\n", name); return 3; }

int main(int argc, char** argv) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  FILE* in; FILE* out;
  unsigned long long n = 0, d[4];
  float* host[4];
  void* context = NULL;
  int device = 0, i, step;
  LuminaVTritonEngine* engine;
  if (argc != 3 || !cuda) { printf("usage, or no libcuda\n"); return 3; }
  {
    NEED("cuInit", init_fn, cu_init) NEED("cuDeviceGet", device_fn, cu_device)
    NEED("cuDevicePrimaryCtxRetain", retain_fn, cu_retain) NEED("cuCtxSetCurrent", set_fn, cu_set)
    NEED("cuMemAlloc_v2", alloc_fn, cu_alloc) NEED("cuMemcpyHtoD_v2", htod_fn, cu_htod)
    NEED("cuMemcpyDtoH_v2", dtoh_fn, cu_dtoh) NEED("cuCtxSynchronize", sync_fn, cu_sync)
    if (cu_init(0) || cu_device(&device, 0) || cu_retain(&context, device) || cu_set(context)) return 4;
    in = fopen(argv[1], "rb");
    if (!in || fread(&n, sizeof n, 1, in) != 1) return 5;
    for (i = 0; i < 4; ++i) {  /* x, g, m, v */
      host[i] = (float*)calloc(n, sizeof(float));
      if (i < 2 && fread(host[i], sizeof(float), n, in) != n) return 5;
      if (cu_alloc(&d[i], n * sizeof(float)) || cu_htod(d[i], host[i], n * sizeof(float))) return 6;
    }
    fclose(in);
    engine = luminav_triton_engine_create();
    if (!engine) { printf("engine: %s\n", luminav_last_error_message()); return 7; }
    out = fopen(argv[2], "wb");
    if (!out) return 5;
    for (step = 1; step <= 2; ++step) {
      if (luminav_triton_step_f32(engine, (float*)(size_t)d[0], (const float*)(size_t)d[1], (float*)(size_t)d[2],
                                  (float*)(size_t)d[3], NULL, NULL, (size_t)n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                                  0.0f, 0.0f, 2, 0, 0, 0.0f, (uint64_t)step, 0) != 0) {
        printf("step: %s\n", luminav_last_error_message());
        return 8;
      }
      if (cu_sync()) return 9;
      for (i = 0; i < 4; ++i) {
        if (i == 1) continue;
        if (cu_dtoh(host[i], d[i], n * sizeof(float))) return 9;
        fwrite(host[i], sizeof(float), n, out);
      }
    }
    fclose(out);
    printf("%s\n%s\n%s\n", luminav_triton_get_platform(engine), luminav_triton_get_arch(engine), luminav_last_backend());
    luminav_triton_engine_destroy(engine);
  }
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_c_program_steps_on_the_aot_kernels_with_no_python_in_its_process(lib, tmp_path):
    """The seed's C API from a C99 program (compiled against the installed headers, linked to libluminav, the
    CUDA driver dlopen'ed): two CLM steps on device memory with LUMINAV_FORCE_BACKEND=triton-aot, each within
    the spec's bound of the float64 reference from the state the program wrote before it."""
    import luminamoon
    source, exe = tmp_path / "aot_step.c", tmp_path / "aot_step"
    source.write_text(C_AOT_PROGRAM)
    lib_path = Path(os.environ.get("LUMINAV_LIBRARY") or luminamoon.c_library_path())
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", luminamoon.include_dir(), str(source), "-o", str(exe),
                    str(lib_path), f"-Wl,-rpath,{lib_path.parent}", "-ldl"], check=True, capture_output=True,
                   text=True)
    n = 300001
    rng = np.random.default_rng(4)
    x = rng.standard_normal(n).astype(np.float32)
    g = (0.01 * rng.standard_normal(n)).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(np.uint64(n).tobytes() + x.tobytes() + g.tobytes())
    env = dict(os.environ, LUMINAV_FORCE_BACKEND="triton-aot")
    out = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    # one line each: the arch and the backend's labels have spaces ("sm_90 Triton 3.6.0")
    platform, arch, backend = out.stdout.strip().split("\n")
    assert platform == "cuda" and arch.startswith("sm_") and backend.startswith("triton-aot:sm_"), out.stdout
    states = np.fromfile(tmp_path / "out.bin", dtype=np.float32).reshape(2, 3, n)
    hyper = Hyper(lr=f32(1e-3), beta1=f32(0.9), beta2=f32(0.999), eps=f32(1e-8), weight_decay=f32(0.01))
    before = (x, np.zeros(n, np.float32), np.zeros(n, np.float32))
    for step in (1, 2):
        ref = reference_step(hyper, *before, g, step)
        after = states[step - 1]
        assert_within_forward_error(f"x, step {step}", after[0], ref.x, ref.scale_x)
        assert_within_forward_error(f"m, step {step}", after[1], ref.m, ref.scale_m)
        assert_within_forward_error(f"v, step {step}", after[2], ref.v, ref.scale_v)
        before = tuple(after)
