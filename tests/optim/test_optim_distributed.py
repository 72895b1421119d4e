"""Sharded equals unsharded: LuminaV on a DTensor split in two over two gloo CPU processes."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from luminav_reference import Hyper, assert_within_forward_error, reference_step

# (optimizer options, the reference's hyperparameters)
CONFIGS = [
    (dict(mode="clm"), dict(buffer_mode=2)),
    (dict(mode="clm", cautious=True, bound="tensor", bound_ratio=0.002),
     dict(buffer_mode=2, cautious=True, bound_mode=1, bound_ratio=0.002)),
    # Version 1's scalar s (td_factor "tensor"); factored/row over Shard(0) is the pass split's
    # factor sums (tests/optim/test_optim_capi.py), not yet wired into the torch front end.
    (dict(mode="tdclm", td_factor="tensor"), dict(buffer_mode=1)),
    (dict(mode="tdclm", td_factor="tensor", cautious=True, bound="tensor", bound_ratio=0.002, lam=0.3,
          tau=0.5),
     dict(buffer_mode=1, cautious=True, bound_mode=1, bound_ratio=0.002, lam=0.3, tau=0.5)),
]
SHAPE = (7, 13)  # 7 rows over 2 ranks: an uneven split (4 + 3 rows)
LR, WD = 1e-2, 0.1


def _data(step: int):
    gen = torch.Generator().manual_seed(100 + step)
    weight = torch.randn(SHAPE, generator=gen) * 0.5
    grad = torch.randn(SHAPE, generator=gen) * 0.01 + 0.003
    return weight, grad


def _worker(rank: int, world: int, store: str) -> None:
    from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

    from luminamoon.optim import LuminaV, NonFiniteGradientError
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        for options, ref_options in CONFIGS:
            weight, grad = _data(0)
            param = torch.nn.Parameter(distribute_tensor(weight.clone(), mesh, [Shard(0)]))
            opt = LuminaV([param], lr=LR, weight_decay=WD, backend="scalar", **options)
            # Two steps: the second starts from non-zero state (s, m, v).
            for t in (1, 2):
                _, g = _data(t)
                x_before = param.detach().full_tensor().double().numpy()
                state = opt.state.get(param, {})
                m_before = state["exp_avg"].full_tensor().numpy() if state else np.zeros(SHAPE)
                if options["mode"] == "clm":
                    v_before = state["exp_avg_sq"].full_tensor().numpy() if state else np.zeros(SHAPE)
                else:
                    v_before = np.array([float(state["exp_avg_sq"])]) if state else np.zeros(1)
                param.grad = distribute_tensor(g.clone(), mesh, [Shard(0)])
                opt.step()
                assert opt.last_native_calls == 1
                ref = reference_step(Hyper(lr=LR, weight_decay=WD, **ref_options), x_before.ravel(),
                                     m_before.ravel(), v_before.ravel(), g.double().numpy().ravel(), t)
                assert ref.bound_binds or "bound" not in options
                x_after = param.detach().full_tensor().numpy().ravel()
                assert_within_forward_error(f"x {options} t={t}", x_after, ref.x, ref.scale_x)
                st = opt.state[param]
                assert_within_forward_error("m", st["exp_avg"].full_tensor().numpy().ravel(), ref.m,
                                            ref.scale_m)
                if options["mode"] == "clm":
                    v_after = st["exp_avg_sq"].full_tensor().numpy().ravel()
                else:
                    v_after = np.array([float(st["exp_avg_sq"])])
                assert_within_forward_error("v", v_after, ref.v, ref.scale_v)

            # A NaN on rank 1's shard only: both ranks refuse, nothing changes anywhere.
            _, g = _data(3)
            g_local = g.clone()
            g_local[6, 5] = float("nan")  # row 6 lives on rank 1
            param.grad = distribute_tensor(g_local, mesh, [Shard(0)])
            before = [param.detach().to_local().clone()] + [v.to_local().clone() if hasattr(v, "to_local") else v.clone()
                                                   for v in opt.state[param].values()]
            try:
                opt.step()
            except NonFiniteGradientError:
                pass
            else:
                raise AssertionError(f"rank {rank}: no NonFiniteGradientError")
            after = [param.detach().to_local()] + [v.to_local() if hasattr(v, "to_local") else v
                                          for v in opt.state[param].values()]
            for a, b in zip(before, after):
                assert torch.equal(a, b)
        _fsdp2_model_matches_unsharded(rank)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _fsdp2_model_matches_unsharded(rank: int) -> None:
    """FSDP2 (fully_shard) on a small model: every parameter is a Shard(0) DTensor, including an
    uneven bias; three TD-CLM + cautious steps match the same optimizer on the unsharded model."""
    from torch.distributed.fsdp import fully_shard

    from luminamoon.optim import LuminaV
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 15), torch.nn.Tanh(), torch.nn.Linear(15, 3))
    plain = torch.nn.Sequential(torch.nn.Linear(8, 15), torch.nn.Tanh(), torch.nn.Linear(15, 3))
    plain.load_state_dict(model.state_dict())
    fully_shard(model)
    options = dict(lr=1e-2, mode="tdclm", td_factor="tensor", cautious=True, bound="tensor", bound_ratio=0.05,
                   backend="scalar")
    sharded_opt, plain_opt = LuminaV(model.parameters(), **options), LuminaV(plain.parameters(), **options)
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        for net, opt in ((model, sharded_opt), (plain, plain_opt)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    for p, q in zip(model.parameters(), plain.parameters()):
        assert type(p).__name__ == "DTensor"
        full = p.detach().full_tensor()
        assert not torch.equal(q.detach(), torch.zeros_like(q))
        torch.testing.assert_close(full, q.detach(), rtol=1e-6, atol=1e-7)
        s_sharded, s_plain = sharded_opt.state[p]["exp_avg_sq"], plain_opt.state[q]["exp_avg_sq"]
        torch.testing.assert_close(s_sharded, s_plain, rtol=1e-6, atol=0.0)


@pytest.mark.timeout(240)
def test_sharded_step_equals_unsharded_reference(tmp_path):
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_worker, args=(2, str(tmp_path / "store")), nprocs=2, join=True)
