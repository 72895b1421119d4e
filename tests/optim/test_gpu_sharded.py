"""The sharded (DTensor) step on CUDA: its phases and the NCCL all-reduce of the exchange (issue 13, item 6).

Run on the one-GPU machine with a process group of one rank (NCCL): the sharded plan runs every
phase and all-reduces the exchange as it would on 8 GPUs, so against the unsharded device step on the
same data it must agree bit for bit (one rank: the same reduction order). Skipped without CUDA.
The multi-GPU tests (2 to 8 ranks) are bench/optim_fsdp2.py's and tests/optim/test_optim_distributed.py's
checks under torchrun; see docs/benchmarks.md for what ran where.
"""
from __future__ import annotations

import os
import time

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SHAPES = {"weight": (96, 130), "bias": (130,), "half": (64, 72)}


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    import torch.distributed as dist
    from torch.distributed.tensor import init_device_mesh
    for key, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                       ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ[key] = value
    store = tmp_path_factory.mktemp("nccl") / "store"
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    yield init_device_mesh("cuda", (1,))
    dist.destroy_process_group()


def _pair(mesh, seed=0):
    from torch.distributed.tensor import Shard, distribute_tensor
    gen = torch.Generator().manual_seed(seed)
    sharded, plain = {}, {}
    for name, shape in SHAPES.items():
        w = torch.randn(shape, generator=gen) * 0.5
        dtype = torch.bfloat16 if name == "half" else torch.float32
        plain[name] = torch.nn.Parameter(w.to("cuda", dtype))
        sharded[name] = torch.nn.Parameter(distribute_tensor(w.to("cuda", dtype), mesh, [Shard(0)]))
    return sharded, plain


def _grads(sharded, plain, mesh, t, nan=False):
    from torch.distributed.tensor import Shard, distribute_tensor
    gen = torch.Generator().manual_seed(100 + t)
    for name, shape in SHAPES.items():
        g = (torch.randn(shape, generator=gen) * 0.01 + 0.002).to("cuda", plain[name].dtype)
        plain[name].grad = g.clone()
        if nan and name == "weight":
            g[5, 7] = float("nan")
        sharded[name].grad = distribute_tensor(g, mesh, [Shard(0)])


def _bits(t):
    t = t.detach()
    t = t.full_tensor() if hasattr(t, "full_tensor") else t
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32)


@pytest.mark.parametrize("options", [
    dict(mode="clm"),
    dict(mode="clm", cautious=True, bound="tensor", bound_ratio=0.002),
    dict(mode="tdclm", td_factor="tensor", cautious=True, lam=0.3, tau=0.5),
    # the sharded step's row and column sums read the factor kernels' strip layout (session 5's tiles)
    dict(mode="tdclm", td_factor="factored"),
    dict(mode="tdclm", td_factor="row", cautious=True),
], ids=["clm", "clm-cautious-bound", "tdclm-tensor-cautious", "tdclm-factored", "tdclm-row-cautious"])
def test_sharded_equals_unsharded_bit_for_bit(mesh, options):
    from luminamoon.optim import LuminaV
    sharded, plain = _pair(mesh)
    opts = [LuminaV(list(ps.values()), lr=1e-2, weight_decay=0.1, **options) for ps in (sharded, plain)]
    for t in range(1, 11):
        _grads(sharded, plain, mesh, t)
        for opt in opts:
            opt.step()
    assert opts[0]._plans[0].exchange is not None  # the sharded plan ran
    for name in SHAPES:
        assert torch.equal(_bits(sharded[name]), _bits(plain[name])), name
        for key in ("exp_avg", "exp_avg_sq"):
            a, b = opts[0].state[sharded[name]][key], opts[1].state[plain[name]][key]
            assert torch.equal(_bits(a), _bits(b)), (name, key)


def test_sharded_step_does_not_wait_for_the_gpu(mesh):
    from luminamoon.optim import LuminaV
    sharded, plain = _pair(mesh)
    opt = LuminaV(list(sharded.values()), lr=1e-2)
    _grads(sharded, plain, mesh, 1)
    opt.step()
    torch.cuda.synchronize()
    _grads(sharded, plain, mesh, 2)
    torch.cuda._sleep(200_000_000)  # ~100 ms of queued work
    t0 = time.perf_counter()
    opt.step()
    host_ms = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    assert host_ms < 30.0, f"opt.step() took {host_ms:.1f} ms on the host: it waited for the GPU"


def test_nan_on_the_shard_writes_nothing_and_raises_later(mesh):
    from luminamoon.optim import LuminaV, NonFiniteGradientError
    sharded, plain = _pair(mesh)
    opt = LuminaV(list(sharded.values()), lr=1e-2)
    _grads(sharded, plain, mesh, 1)
    opt.step()
    before = {n: (_bits(p).clone(), {k: _bits(v).clone() for k, v in opt.state[p].items() if k != "seed"})
              for n, p in sharded.items()}
    _grads(sharded, plain, mesh, 2, nan=True)
    opt.step()  # returns; the verdict is on the device
    with pytest.raises(NonFiniteGradientError, match="parameter 0"):
        opt.synchronize()
    for n, p in sharded.items():
        assert torch.equal(_bits(p), before[n][0]), n
        for k, v in before[n][1].items():
            assert torch.equal(_bits(opt.state[p][k]), v), (n, k)


def test_grad_scaler_found_inf_skips_on_the_device(mesh):
    from luminamoon.optim import LuminaV
    sharded, plain = _pair(mesh)
    opts = [LuminaV(list(ps.values()), lr=1e-2) for ps in (sharded, plain)]
    scale = torch.full((), 512.0, device="cuda")
    for t in (1, 2):
        _grads(sharded, plain, mesh, t)
        for p in sharded.values():
            p.grad.mul_(512.0)
        opts[0].grad_scale, opts[0].found_inf = scale, torch.zeros((), device="cuda")
        opts[0].step()
        del opts[0].grad_scale, opts[0].found_inf
        opts[1].step()
    for name in SHAPES:  # a power-of-two scale unscales exactly: the same bits as unscaled gradients
        assert torch.equal(_bits(sharded[name]), _bits(plain[name])), name
    before = [_bits(p).clone() for p in sharded.values()]
    _grads(sharded, plain, mesh, 3)
    opts[0].grad_scale, opts[0].found_inf = scale, torch.ones((), device="cuda")
    opts[0].step()
    assert opts[0].skipped_steps == 1
    for b, p in zip(before, sharded.values()):
        assert torch.equal(_bits(p), b)
