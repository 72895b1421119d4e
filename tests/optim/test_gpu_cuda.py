"""The CUDA backend against the scalar reference backend and the float64 spec, on a GPU.

Runs where torch sees a CUDA device and libluminav's cuda backend is available
(the H200 of src/optim/cuda/gpu_check.py); elsewhere every test skips.
LUMINAV_GPU_TEST_HARNESS=1 runs the same code with CPU tensors and the scalar
backend standing in for the GPU, to check the harness itself without a GPU.
The library is LUMINAV_LIBRARY when set, else the installed package's (the
ctypes mirrors of luminav.h come from tests/luminav_ctypes.py).
"""
from __future__ import annotations

import ctypes as C
import itertools
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import luminav_ctypes  # noqa: E402
from luminav_ctypes import Hyperparams, Options, Tensor, as_hyper, hyperparams  # noqa: E402
from luminav_reference import assert_within_forward_error, normwise_relative_error, reference_step  # noqa: E402

torch = pytest.importorskip("torch")

HARNESS = os.environ.get("LUMINAV_GPU_TEST_HARNESS") == "1"
F32, BF16, F16 = 0, 1, 2
TORCH_DTYPE = {F32: torch.float32, BF16: torch.bfloat16, F16: torch.float16}
OK, INVALID, NONFINITE = 0, 1, 2


def library_path() -> str:
    import luminamoon
    return os.environ.get("LUMINAV_LIBRARY") or luminamoon.c_library_path()


def load_library():
    """libluminav: LUMINAV_LIBRARY when set (a library carried to a GPU machine), else the installed one."""
    lib = luminav_ctypes.load_library(library_path())
    lib.luminav_step_multi.argtypes = [C.POINTER(Hyperparams), C.POINTER(Tensor), C.c_size_t,
                                       C.POINTER(Options)]
    return lib


def backend_reason(lib, name: str) -> str | None:
    """None when the backend is available, else its reason."""
    for i in range(lib.luminav_backend_count()):
        if lib.luminav_backend_name(i).decode() == name:
            return None if lib.luminav_backend_available(i) else lib.luminav_backend_unavailable_reason(i).decode()
    return f"backend {name} is not compiled in"


@pytest.fixture(scope="module")
def lib():
    lib = load_library()
    if not HARNESS:
        if not torch.cuda.is_available():
            pytest.skip("torch sees no CUDA device")
        reason = backend_reason(lib, "cuda")
        if reason is not None:
            pytest.skip(f"cuda backend unavailable: {reason}")
    return lib


def device():
    return torch.device("cpu") if HARNESS else torch.device("cuda")


def gpu_options(stream=None) -> Options:
    if HARNESS:
        return Options(backend=b"scalar", device_type=0)
    s = torch.cuda.current_stream() if stream is None else stream
    return Options(backend=b"cuda", device_type=1, stream=s.cuda_stream)


def scalar_options() -> Options:
    return Options(backend=b"scalar", device_type=0)


class State:
    """One tensor's buffers (torch tensors on one device) and its luminav_tensor."""

    def __init__(self, x, g, m, v, master, param_dtype, grad_dtype, offset=0, seed=0, misalign=0):
        self.x, self.g, self.m, self.v, self.master = x, g, m, v, master
        self.param_dtype, self.grad_dtype, self.offset, self.seed = param_dtype, grad_dtype, offset, seed
        self.misalign = misalign

    @staticmethod
    def random(gen: torch.Generator, n: int, mode: int, param_dtype: int, grad_dtype: int,
               with_master: bool, seed: int = 0, misalign: int = 0) -> "State":
        def randn(scale):
            return torch.randn(n + misalign, generator=gen, dtype=torch.float64) * scale

        x32 = (randn(0.5)).float()
        g = (randn(0.01)).to(TORCH_DTYPE[grad_dtype])
        m = randn(0.01).float()
        if mode == 2:
            v = ((torch.rand(n + misalign, generator=gen, dtype=torch.float64) + 0.05) * 1e-4).float()
        else:
            v = torch.tensor([4e-5] * (1 + misalign), dtype=torch.float32)
        master = x32.clone() if with_master else None
        x = x32.to(TORCH_DTYPE[param_dtype])
        # `misalign` elements in front make every buffer start off 16 bytes
        # (the kernels' scalar path); the views are what the step sees.
        cut = (lambda a: a[misalign:]) if misalign else (lambda a: a)
        return State(cut(x), cut(g), cut(m), cut(v) if mode == 2 else v[misalign:], cut(master) if with_master else None,
                     param_dtype, grad_dtype, seed=seed, misalign=misalign)

    def to(self, dev) -> "State":
        pad = self.misalign

        def mv(a):  # a fresh copy that keeps the misalignment of the original
            if a is None:
                return None
            buf = torch.empty(a.numel() + pad, dtype=a.dtype, device=dev)
            buf[pad:].copy_(a)
            return buf[pad:]
        return State(mv(self.x), mv(self.g), mv(self.m), mv(self.v), mv(self.master), self.param_dtype,
                     self.grad_dtype, self.offset, self.seed, self.misalign)

    def clone(self) -> "State":
        return self.to(self.x.device)

    def struct(self) -> Tensor:
        def ptr(a):
            return None if a is None else a.data_ptr()
        # TD-CLM here is version 1's one scalar (td_factor tensor): the entry points these tests
        # call are the synchronous ones (the factored forms run in luminav_step_groups).
        return Tensor(ptr(self.x), ptr(self.g), ptr(self.m), ptr(self.v), ptr(self.master), self.x.numel(),
                      self.offset, self.seed, self.param_dtype, self.grad_dtype, 0, 2)

    def numpy(self) -> dict:
        def f(a):
            return None if a is None else a.detach().to("cpu").float().numpy().astype(np.float64)

        def bits(a):
            two = a.element_size() == 2
            raw = a.detach().to("cpu").contiguous().view(torch.int16 if two else torch.int32).numpy()
            return raw.view(np.uint16 if two else np.uint32)
        return {"x": f(self.x), "x_bits": bits(self.x), "g": f(self.g), "m": f(self.m), "v": f(self.v),
                "master": f(self.master)}


def same_bits(a, b) -> bool:
    """Equal bit patterns (NaN included)."""
    view = torch.int16 if a.element_size() == 2 else torch.int32
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def step(lib, hp, states, options) -> int:
    arr = (Tensor * len(states))(*[s.struct() for s in states])
    code = lib.luminav_step_multi(C.byref(hp), arr, len(states), C.byref(options))
    if options.device_type == 1:
        torch.cuda.synchronize()
    return code


def check_against_scalar(lib, hp, before: State, gpu: State, host: State, what: str):
    """GPU state after the step vs the scalar backend's, under the spec's accuracy contract."""
    b, a, r = before.numpy(), gpu.numpy(), host.numpy()
    x_old = b["master"] if b["master"] is not None else b["x"]
    ref = reference_step(as_hyper(hp), x_old, b["m"], b["v"], b["g"], int(hp.step))
    assert_within_forward_error(f"{what} m", a["m"], r["m"], ref.scale_m)
    assert_within_forward_error(f"{what} v/s", a["v"], r["v"], ref.scale_v)
    if a["master"] is not None:
        assert_within_forward_error(f"{what} master", a["master"], r["master"], ref.scale_x)
        # Bit for bit where fp32 agrees (spec, "Stochastically rounded outputs").
        same = a["master"] == r["master"]
        assert np.array_equal(a["x_bits"][same], r["x_bits"][same]), f"{what}: 16-bit param bits differ where fp32 agrees"
    if before.param_dtype == F32:
        assert_within_forward_error(f"{what} param", a["x"], r["x"], ref.scale_x)
    else:
        # Without a master the fp32 x is not visible: the 16-bit codes agree or are neighbours.
        diff = np.abs(a["x_bits"].astype(np.int64) - r["x_bits"].astype(np.int64))
        assert diff.max() <= 1, f"{what}: 16-bit params differ by {diff.max()} codes"
    # And the scalar backend itself against the float64 spec (both sides of the comparison are sane).
    assert_within_forward_error(f"{what} scalar m", r["m"], ref.m, ref.scale_m)


MODES = [2, 1]
OPTION_SETS = [
    dict(),                                            # AdamW
    dict(lam=0.3),
    dict(tau=0.5),                                     # soft clip bites for |u| > 0.5
    dict(cautious=1),
    dict(bound_mode=1, bound_ratio=1e-4),              # the tensor bound binds
    dict(bound_mode=2, bound_ratio=1e-3),
    dict(bound_mode=3, bound_ratio=0.05),              # the RMS clip (beyond the spec) binds
    dict(lam=0.2, tau=1.0, cautious=1, bound_mode=1, bound_ratio=1e-3, weight_decay=0.1),
]
DTYPES = [(F32, F32, False), (F32, F32, True), (BF16, BF16, False), (BF16, BF16, True), (F16, F16, True),
          (F16, F32, False), (BF16, F32, True)]


@pytest.mark.parametrize("mode", MODES, ids=["clm", "tdclm"])
@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "adamw")
@pytest.mark.parametrize("dtypes", DTYPES, ids=lambda d: f"p{d[0]}g{d[1]}{'m' if d[2] else ''}")
@pytest.mark.parametrize("sr", [1, 0], ids=["sr", "rne"])
def test_one_step_matches_scalar_reference(lib, mode, options, dtypes, sr):
    param_dtype, grad_dtype, with_master = dtypes
    if param_dtype == F32 and sr == 0:
        pytest.skip("rounding mode does not apply to fp32 parameters")
    gen = torch.Generator().manual_seed(zlib.crc32(repr((mode, options, dtypes, sr)).encode()))
    hp = hyperparams(lib, buffer_mode=mode, stochastic_rounding=sr, step=7, **options)
    for n, misalign in [(70001, 0), (4099, 1)]:   # vector path + tail; unaligned scalar path
        before = State.random(gen, n, mode, param_dtype, grad_dtype, with_master, seed=12345, misalign=misalign)
        host, gpu = before.clone(), before.to(device())
        assert step(lib, hp, [host], scalar_options()) == OK, lib.luminav_last_error_message()
        assert step(lib, hp, [gpu], gpu_options()) == OK, lib.luminav_last_error_message()
        if not HARNESS:
            assert lib.luminav_last_backend().decode().startswith("cuda")
        check_against_scalar(lib, hp, before, gpu, host, f"n={n} misalign={misalign}")


def test_adamw_defaults_are_bit_identical_to_the_scalar_backend(lib):
    # The kernels call core's math with -fmad=false: the same fp32 operations in
    # the same order, so AdamW (no tanh) agrees bit for bit, not just within 1e-6 s_i.
    gen = torch.Generator().manual_seed(3)
    hp = hyperparams(lib, step=3)
    before = State.random(gen, 1 << 20, 2, F32, F32, False)
    host, gpu = before.clone(), before.to(device())
    assert step(lib, hp, [host], scalar_options()) == OK
    assert step(lib, hp, [gpu], gpu_options()) == OK
    for name in ("x", "m", "v"):
        assert torch.equal(getattr(gpu, name).cpu(), getattr(host, name)), name


@pytest.mark.parametrize("mode", MODES, ids=["clm", "tdclm"])
def test_many_tensors_in_one_call_with_mixed_dtypes(lib, mode):
    # 90 tensors of alternating dtypes (a launch each), then 140 fp32 tensors
    # in a row: more than one launch's 128 slots (Note [one launch for a
    # model's tensors]), and in TD-CLM the s of every tensor read back in one
    # gather (Backend::load_scalars).
    gen = torch.Generator().manual_seed(11)
    hp = hyperparams(lib, buffer_mode=mode, cautious=1, bound_mode=1, bound_ratio=1e-3, step=5)
    mixed = [1, 7, 8, 9, 1000, 8192, 8193, 65536, 65537, 200003] * 9
    same = [1, 7, 8, 9, 1000, 8193, 4096] * 20
    sizes = mixed + same
    dtypes = itertools.chain(itertools.islice(itertools.cycle(
        [(F32, F32, False), (BF16, BF16, True), (F16, F32, False)]), len(mixed)),
        itertools.repeat((F32, F32, False), len(same)))
    befores = []
    for i, n in enumerate(sizes):
        p, g, m = next(dtypes)
        befores.append(State.random(gen, n, mode, p, g, m, seed=i))
    hosts = [b.clone() for b in befores]
    gpus = [b.to(device()) for b in befores]
    assert step(lib, hp, hosts, scalar_options()) == OK
    assert step(lib, hp, gpus, gpu_options()) == OK, lib.luminav_last_error_message()
    for i, (b, gg, h) in enumerate(zip(befores, gpus, hosts)):
        check_against_scalar(lib, hp, b, gg, h, f"tensor {i} (n={sizes[i]})")


def test_nonfinite_gradient_anywhere_leaves_every_tensor_untouched(lib):
    gen = torch.Generator().manual_seed(5)
    hp = hyperparams(lib)
    states = [State.random(gen, n, 2, F32, F32, False).to(device()) for n in (10000, 300000)]
    states[1].g[123457] = float("nan")
    copies = [s.clone() for s in states]
    assert step(lib, hp, states, gpu_options()) == NONFINITE
    assert b"tensors[1]" in lib.luminav_last_error_message()
    for s, c in zip(states, copies):
        for name in ("x", "g", "m", "v"):
            assert same_bits(getattr(s, name), getattr(c, name)), name


def test_reductions_are_deterministic_run_to_run(lib):
    # TD-CLM with the cautious mask and the tensor bound uses every reduction;
    # the same inputs give the same bits every time (fixed tiles, fixed order).
    gen = torch.Generator().manual_seed(9)
    hp = hyperparams(lib, buffer_mode=1, cautious=1, bound_mode=1, bound_ratio=1e-3, step=4)
    before = State.random(gen, (1 << 22) + 3, 1, F32, F32, False).to(device())
    results = []
    for _ in range(3):
        s = before.clone()
        assert step(lib, hp, [s], gpu_options()) == OK
        results.append(s)
    for s in results[1:]:
        assert torch.equal(s.x, results[0].x) and torch.equal(s.v, results[0].v)


def test_shards_with_index_offset_round_like_the_whole_tensor(lib):
    gen = torch.Generator().manual_seed(13)
    hp = hyperparams(lib, step=2)                   # CLM has no cross-element sums without options
    whole = State.random(gen, 100000, 2, BF16, BF16, True, seed=77).to(device())
    parts = []
    for lo, hi in [(0, 40000), (40000, 100000)]:
        s = State(whole.x[lo:hi].clone(), whole.g[lo:hi].clone(), whole.m[lo:hi].clone(), whole.v[lo:hi].clone(),
                  whole.master[lo:hi].clone(), BF16, BF16, offset=lo, seed=77)
        parts.append(s)
    assert step(lib, hp, [whole], gpu_options()) == OK
    assert step(lib, hp, parts, gpu_options()) == OK
    assert torch.equal(torch.cat([p.x for p in parts]), whole.x)


def test_hundred_steps_stay_within_normwise_1e5(lib):
    gen = torch.Generator().manual_seed(21)
    for mode, param_dtype, with_master in [(2, F32, False), (1, BF16, True)]:
        hp = hyperparams(lib, buffer_mode=mode, lam=0.1, tau=1.0, cautious=1, bound_mode=2, bound_ratio=1e-2)
        host = State.random(gen, 50000, mode, param_dtype, param_dtype, with_master)
        gpu = host.to(device())
        for t in range(1, 101):
            hp.step = t
            g = torch.randn(50000, generator=gen, dtype=torch.float64).mul(0.01).to(TORCH_DTYPE[param_dtype])
            host.g.copy_(g)
            gpu.g.copy_(g.to(gpu.g.device))
            assert step(lib, hp, [host], scalar_options()) == OK
            assert step(lib, hp, [gpu], gpu_options()) == OK
        a, r = gpu.numpy(), host.numpy()
        for name in ("m", "v", "master" if with_master else "x"):
            err = normwise_relative_error(a[name], r[name])
            assert err <= 1e-5, f"mode {mode} {name}: normwise relative error {err:.2e}"


def test_runs_on_a_side_stream(lib):
    if HARNESS:
        pytest.skip("needs a CUDA stream")
    gen = torch.Generator().manual_seed(17)
    hp = hyperparams(lib, buffer_mode=1, step=3)
    before = State.random(gen, 1 << 20, 1, F32, F32, False)
    host = before.clone()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        gpu = before.to(device())
        assert lib.luminav_step_multi(C.byref(hp), (Tensor * 1)(gpu.struct()), 1,
                                      C.byref(gpu_options(side))) == OK
    side.synchronize()
    assert step(lib, hp, [host], scalar_options()) == OK
    check_against_scalar(lib, hp, before, gpu, host, "side stream")


def test_host_pointers_with_device_type_cuda_are_refused(lib):
    if HARNESS:
        pytest.skip("needs the cuda backend")
    gen = torch.Generator().manual_seed(1)
    host = State.random(gen, 1000, 2, F32, F32, False)
    before = host.clone()
    code = step(lib, hyperparams(lib), [host], gpu_options())
    assert code == INVALID, code
    assert b"not CUDA device memory" in lib.luminav_last_error_message()
    assert torch.equal(host.x, before.x)
    # The context is not poisoned: a device step still works.
    gpu = before.to(device())
    assert step(lib, hyperparams(lib), [gpu], gpu_options()) == OK


def test_standalone_engine_names_cuda_and_the_arch(lib):
    if HARNESS:
        pytest.skip("needs the cuda backend")
    major, minor = torch.cuda.get_device_capability()
    code = (
        "import ctypes as C, os, sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import test_gpu_cuda as t\n"
        "lib = t.load_library()\n"
        "e = lib.luminav_triton_engine_create()\n"
        "assert e, lib.luminav_last_error_message()\n"
        "print(lib.luminav_triton_get_platform(e).decode(), lib.luminav_triton_get_arch(e).decode())\n"
        "n = 100000\n"
        "gen = torch.Generator().manual_seed(2)\n"
        "x = torch.randn(n, generator=gen); g = torch.randn(n, generator=gen) * 0.01\n"
        "m = torch.zeros(n); v = torch.zeros(n)\n"
        "xd, gd, md, vd = (a.cuda() for a in (x, g, m, v))\n"
        "p = lambda a: a.data_ptr()\n"
        "rc = lib.luminav_triton_step_f32(e, p(xd), p(gd), p(md), p(vd), None, None, n, 1e-3, 0.9, 0.999,"
        " 1e-8, 0.01, 0.0, 0.0, 2, 0, 0, 0.0, 1, 0)\n"
        "torch.cuda.synchronize()\n"
        "assert rc == 0, lib.luminav_last_error_message()\n"
        "# torch's own AdamW (fp32, step 1) as the independent reference\n"
        "w = torch.nn.Parameter(x.cuda().clone()); w.grad = g.cuda().clone()\n"
        "torch.optim.AdamW([w], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=False).step()\n"
        "err = float((xd - w.detach()).abs().max() / w.detach().abs().max())\n"
        "print('moved', float((xd.cpu() - x).abs().max()), 'err', err)\n"
    ) % str(Path(__file__).resolve().parent)
    env = dict(os.environ, LUMINAV_FORCE_BACKEND="cuda")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    platform, arch = out.stdout.split("\n")[0].split()
    assert platform == "cuda"
    assert arch == f"sm_{major}{minor}"
    fields = out.stdout.split()
    assert float(fields[fields.index("moved") + 1]) > 0           # the step moved the weights
    assert float(fields[fields.index("err") + 1]) <= 1e-6          # ... as torch's AdamW does


def f32(value: float) -> float:
    """The float the standalone API's float arguments hold (the reference gets the same value)."""
    return float(np.float32(value))


def standalone_step(lib, engine, s: State, hp: Hyperparams, scratch=None) -> int:
    def ptr(a):
        return None if a is None else a.data_ptr()
    return lib.luminav_triton_step_f32(
        engine, ptr(s.x), ptr(s.g), ptr(s.m), ptr(s.v), ptr(s.master), ptr(scratch), s.x.numel(), hp.lr,
        hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.tau, hp.lam, hp.buffer_mode, hp.cautious,
        hp.bound_mode, hp.bound_ratio, hp.step, s.seed)


def test_standalone_engine_routes_device_pointers_to_the_gpu(lib):
    """Without LUMINAV_FORCE_BACKEND: device pointers step on the GPU, host pointers on the CPU,
    both under the spec's bound against each other; a mix is refused; platform/arch name the GPU."""
    if HARNESS:
        pytest.skip("needs the cuda backend")
    if os.environ.get("LUMINAV_FORCE_BACKEND", "auto") not in ("", "auto"):
        pytest.skip("LUMINAV_FORCE_BACKEND fixes the engine's backend")
    major, minor = torch.cuda.get_device_capability()
    engine = lib.luminav_triton_engine_create()
    assert engine, lib.luminav_last_error_message()
    try:
        assert lib.luminav_triton_get_platform(engine).decode() == "cuda"
        assert lib.luminav_triton_get_arch(engine).decode() == f"sm_{major}{minor}"
        gen = torch.Generator().manual_seed(7)
        cases = [(2, False, False, dict()),
                 (2, True, True, dict(lam=0.2, tau=1.0, cautious=1, bound_mode=1, bound_ratio=1e-3)),
                 (1, False, True, dict(cautious=1, weight_decay=0.1))]
        for mode, with_master, own_scratch, options in cases:
            what = f"standalone mode={mode} master={with_master} scratch={own_scratch} {options}"
            n = 200_003
            hp = hyperparams(lib, buffer_mode=mode, step=3, lr=f32(1e-3), beta1=f32(0.9), beta2=f32(0.999),
                             eps=f32(1e-8), weight_decay=f32(options.pop("weight_decay", 0.01)),
                             **{k: (f32(v) if isinstance(v, float) else v) for k, v in options.items()})
            before = State.random(gen, n, mode, F32, F32, with_master)
            host, gpu = before.clone(), before.to(device())
            scratch = (torch.empty(lib.luminav_scratch_bytes(n), dtype=torch.uint8, device=device())
                       if own_scratch else None)
            assert standalone_step(lib, engine, gpu, hp, scratch) == OK, lib.luminav_last_error_message()
            torch.cuda.synchronize()
            assert lib.luminav_last_backend().decode().startswith("cuda"), lib.luminav_last_backend()
            assert standalone_step(lib, engine, host, hp) == OK, lib.luminav_last_error_message()
            assert not lib.luminav_last_backend().decode().startswith("cuda"), lib.luminav_last_backend()
            assert not torch.equal(gpu.x.cpu(), before.x)  # the GPU step moved the weights
            check_against_scalar(lib, hp, before, gpu, host, what)
        # Host and device pointers in one call: refused, nothing written on either side.
        hp = hyperparams(lib, buffer_mode=2, step=1)
        mixed = State.random(gen, 1000, 2, F32, F32, False).to(device())
        mixed.g = mixed.g.cpu()
        kept = mixed.x.clone()
        assert standalone_step(lib, engine, mixed, hp) == INVALID
        message = lib.luminav_last_error_message()
        assert b"mixed host and device pointers" in message and b"grad" in message, message
        torch.cuda.synchronize()
        assert torch.equal(mixed.x, kept)
        host_param = State.random(gen, 1000, 2, F32, F32, False)
        host_param.m = host_param.m.to(device())
        kept = host_param.x.clone()
        assert standalone_step(lib, engine, host_param, hp) == INVALID
        assert b"exp_avg" in lib.luminav_last_error_message()
        assert torch.equal(host_param.x, kept)
    finally:
        lib.luminav_triton_engine_destroy(engine)


def test_ptx_is_used_when_the_cubin_is_a_stub(lib, tmp_path):
    """A kernel directory whose sm_XY cubin is a stub: refused by name, the PTX runs instead."""
    if HARNESS:
        pytest.skip("needs the cuda backend")
    import hashlib
    import json
    import shutil
    src = Path(os.environ.get("LUMINAV_CUDA_KERNEL_SOURCE_DIR", Path(library_path()).parent / "luminav_cuda_kernels"))
    manifest = json.loads((src / "manifest.json").read_text())
    if not any(a["kind"] == "ptx" for a in manifest["artifacts"]):
        # bench/gpu_suite.sh builds LUMINA_CUDA_ARCHS=90 only (cubins, no PTX), to build faster there
        pytest.skip("this build carries no PTX artifact to fall back to (LUMINA_CUDA_ARCHS without a PTX target)")
    stub = b"// LUMINAV_TRITON_AOT_CUBIN\nplaceholder\n"
    for a in manifest["artifacts"]:
        if a["kind"] == "ptx":
            shutil.copy(src / a["file"], tmp_path / a["file"])
        else:
            (tmp_path / a["file"]).write_bytes(stub)
            a["size"], a["sha256"] = len(stub), hashlib.sha256(stub).hexdigest()
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    code = (
        "import ctypes as C, sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import test_gpu_cuda as t\n"
        "lib = t.load_library()\n"
        "gen = torch.Generator().manual_seed(4)\n"
        "before = t.State.random(gen, 10000, 2, t.F32, t.F32, False)\n"
        "host, gpu = before.clone(), before.to('cuda')\n"
        "hp = t.hyperparams(lib)\n"
        "assert t.step(lib, hp, [gpu], t.gpu_options()) == 0, lib.luminav_last_error_message()\n"
        "assert t.step(lib, hp, [host], t.scalar_options()) == 0\n"
        "t.check_against_scalar(lib, hp, before, gpu, host, 'ptx')\n"
        "print('ok')\n"
    ) % str(Path(__file__).resolve().parent)
    env = dict(os.environ, LUMINAV_CUDA_KERNEL_DIR=str(tmp_path), LUMINAV_LOG="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "(PTX)" in out.stderr, out.stderr
    assert "is a stub artifact" in out.stderr, out.stderr
