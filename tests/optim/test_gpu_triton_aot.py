"""The triton-aot backend on a GPU: luminav_step_multi through the Triton AOT kernels (built on a
machine without a GPU) against the scalar backend and the float64 spec, stochastic rounding bit for
bit where the fp32 masters agree, the finite check, the refusals, and LUMINAV_FORCE_BACKEND.

Skips where torch sees no CUDA device or the backend cannot run (the reason is printed).
The kernels are LUMINAV_TRITON_AOT_DIR's, else the ones installed beside libluminav.
"""
from __future__ import annotations

import ctypes as C
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_gpu_cuda import (F32, BF16, OK, NONFINITE, State, backend_reason, check_against_scalar,  # noqa: E402
                           hyperparams, load_library, scalar_options, step)
from luminav_ctypes import Options  # noqa: E402

torch = pytest.importorskip("torch")
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
                                           (dict(buffer_mode=1), "CLM steps only"),
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
