"""Sharded equals unsharded: LuminaV on DTensor (FSDP2 Shard(0)) parameters over 2 and 4 gloo CPU processes.

The sharded step all-reduces one float64 exchange tensor per exchange (Note [sharded step] in
luminamoon/optim/torch_optimizer.py). Each worker runs the same steps on DTensor shards and on the
plain tensors, and checks: the first two steps against the float64 reference of the spec
(tests/luminav_reference.py); ten steps against the unsharded optimizer, bit for bit where the
reduction order cannot matter (CLM without the cautious mask and the bound: no global sum enters the
update) and within the spec's normwise bound elsewhere; bf16 parameters written by stochastic
rounding bit for bit (the hash is keyed on the logical index, so every world size writes the same
bits); a NaN on one rank's shard; GradScaler (its scale and found_inf on the sharded path); a
torch.distributed.checkpoint saved on 4 ranks and resumed on 2.
"""
from __future__ import annotations

import os
import pickle
import signal
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from luminav_reference import (Hyper, accuracy_factor, assert_within_forward_error, normwise_relative_error,
                               reference_step)

# (name, optimizer options, the reference's hyperparameters, bit-identical to unsharded)
CONFIGS = [
    ("clm", dict(mode="clm"), dict(buffer_mode=2), True),
    ("clm cautious bound", dict(mode="clm", cautious=True, bound="tensor", bound_ratio=0.002),
     dict(buffer_mode=2, cautious=True, bound_mode=1, bound_ratio=0.002), False),
    ("tdclm factored", dict(mode="tdclm", td_factor="factored"), dict(buffer_mode=1, td_factor="factored"), False),
    # Two exchanges: the cautious and bound sums need the all-reduced factors.
    ("tdclm factored cautious bound",
     dict(mode="tdclm", td_factor="factored", cautious=True, bound="tensor", bound_ratio=0.002, lam=0.3, tau=0.5),
     dict(buffer_mode=1, td_factor="factored", cautious=True, bound_mode=1, bound_ratio=0.002, lam=0.3, tau=0.5),
     False),
    ("tdclm tensor", dict(mode="tdclm", td_factor="tensor"), dict(buffer_mode=1, td_factor="tensor"), False),
]
# 7 rows: uneven over 2 (4 + 3) and 4 ranks (2, 2, 2, 1); the bias of 3 leaves rank 3 an empty shard.
SHAPES = {"weight": (7, 13), "bias": (3,), "half": (6, 8)}
LR, WD, STEPS = 1e-2, 0.1, 10


def _data(step: int):
    gen = torch.Generator().manual_seed(100 + step)
    return {name: (torch.randn(shape, generator=gen) * 0.5, torch.randn(shape, generator=gen) * 0.01 + 0.003)
            for name, shape in SHAPES.items()}


def _params(mesh):
    from torch.distributed.tensor import Shard, distribute_tensor
    init = _data(0)
    sharded, plain = {}, {}
    for name, (w, _) in init.items():
        dtype = torch.bfloat16 if name == "half" else torch.float32
        sharded[name] = torch.nn.Parameter(distribute_tensor(w.clone().to(dtype), mesh, [Shard(0)]))
        plain[name] = torch.nn.Parameter(w.clone().to(dtype))
    return sharded, plain


def _set_grads(sharded, plain, step: int, mesh, poison_rank: int | None = None) -> None:
    from torch.distributed.tensor import Shard, distribute_tensor
    for name, (_, g) in _data(step).items():
        dtype = sharded[name].dtype
        plain[name].grad = g.clone().to(dtype)
        local = g.clone().to(dtype)
        if poison_rank is not None and name == "weight":
            local[6, 5] = float("nan")  # row 6 lives on the last rank only
        sharded[name].grad = distribute_tensor(local, mesh, [Shard(0)])


def _full(t) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _check_against_reference(rank, label, options, ref_options, mesh) -> None:
    """Steps 1 and 2 of the fp32 weight against the float64 reference of the spec."""
    from luminamoon.optim import LuminaV
    sharded, _ = _params(mesh)
    opt = LuminaV([sharded["weight"]], lr=LR, weight_decay=WD, backend="scalar", **options)
    hp = Hyper(lr=LR, weight_decay=WD, **ref_options)
    p = sharded["weight"]
    rows = SHAPES["weight"][0]
    for t in (1, 2):
        g = _data(t)["weight"][1]
        x_before = p.detach().full_tensor().double().numpy().ravel()
        state = opt.state.get(p, {})
        # Copies: full_tensor() of a one-rank mesh may be the live state itself.
        m_before = state["exp_avg"].full_tensor().numpy().ravel().copy() if state else np.zeros(p.numel())
        if state and options["mode"] == "clm":
            v_before = state["exp_avg_sq"].full_tensor().numpy().ravel().copy()
        elif state:
            v_before = _gathered_second_moment(opt, p, options).numpy().copy()
        else:
            v_before = np.zeros(p.numel() if options["mode"] == "clm" else
                                1 if options["td_factor"] == "tensor" else rows + p.numel() // rows)
        from torch.distributed.tensor import Shard, distribute_tensor
        p.grad = distribute_tensor(g.clone(), mesh, [Shard(0)])
        opt.step()
        ref = reference_step(hp, x_before, m_before, v_before, g.double().numpy().ravel(), t, rows=rows)
        assert ref.bound_binds or "bound" not in options, label
        factor = accuracy_factor(hp)
        assert_within_forward_error(f"rank {rank} x {label} t={t}", p.detach().full_tensor().numpy().ravel(),
                                    ref.x, ref.scale_x, factor)
        assert_within_forward_error(f"m {label}", opt.state[p]["exp_avg"].full_tensor().numpy().ravel(), ref.m,
                                    ref.scale_m, factor)


def _gathered_second_moment(opt, p, options) -> torch.Tensor:
    """The logical second moment: CLM's v, TD-CLM's s, or the gathered row factor then the column factor."""
    v = opt.state[p]["exp_avg_sq"]
    if options["mode"] == "clm":
        return _full(v).reshape(-1)
    if options["td_factor"] == "tensor":
        return v.reshape(-1)
    local_rows = p.to_local().shape[0]
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, (v[:local_rows].clone(), v[local_rows:].clone()))
    cols = [col for _, col in parts if col.numel()]  # every shard with rows holds the same column factor
    assert all(torch.equal(c, cols[0]) for c in cols) if cols else True
    return torch.cat([rows for rows, _ in parts] + cols[:1])


def _check_against_unsharded(rank, label, options, exact, mesh) -> None:
    """Ten steps of all three parameters, sharded against unsharded."""
    from luminamoon.optim import LuminaV
    sharded, plain = _params(mesh)
    opts = [LuminaV(list(ps.values()), lr=LR, weight_decay=WD, backend="scalar", **options) for ps in (sharded, plain)]
    for t in range(1, STEPS + 1):
        _set_grads(sharded, plain, t, mesh)
        for opt in opts:
            opt.step()
    assert opts[0].last_native_calls == 1
    for name in SHAPES:
        got, want = sharded[name].detach().full_tensor(), plain[name].detach()
        if exact:
            # bf16 written by stochastic rounding: keyed on the logical index, bit for bit.
            assert torch.equal(got.view(torch.int16) if got.dtype == torch.bfloat16 else got,
                               want.view(torch.int16) if want.dtype == torch.bfloat16 else want), \
                f"rank {rank} {label} {name}: not bit-identical"
        else:
            if name == "half":  # the fp32 masters: one flipped bf16 rounding would dwarf the bound
                got = opts[0].state[sharded[name]]["master"].full_tensor()
                want = opts[1].state[plain[name]]["master"]
            err = normwise_relative_error(got.double().numpy(), want.double().numpy())
            assert err <= 1e-5, f"rank {rank} {label} {name}: normwise error {err:.3g}"
        m_got = opts[0].state[sharded[name]]["exp_avg"].full_tensor()
        m_want = opts[1].state[plain[name]]["exp_avg"]
        assert normwise_relative_error(m_got.double().numpy(), m_want.double().numpy()) <= 1e-5
        if options["mode"] == "tdclm":
            v_got = _gathered_second_moment(opts[0], sharded[name], options)  # a collective: every rank
            v_want = opts[1].state[plain[name]]["exp_avg_sq"].reshape(-1)
            # (An empty shard reads no second moment and leaves its copy of s as it was.)
            if sharded[name].to_local().numel() > 0 or options["td_factor"] != "tensor":
                assert normwise_relative_error(v_got.double().numpy(), v_want.double().numpy()) <= 1e-5, \
                    (label, name)


def _check_nonfinite_on_one_rank(rank, world, mesh) -> None:
    """A NaN in the last rank's shard: every rank raises, no rank writes anything; with
    skip_nonfinite every rank skips and counts it."""
    from luminamoon.optim import LuminaV, NonFiniteGradientError
    for skip in (False, True):
        sharded, plain = _params(mesh)
        opt = LuminaV(list(sharded.values()), lr=LR, mode="tdclm", cautious=True, backend="scalar",
                      skip_nonfinite=skip)
        _set_grads(sharded, plain, 1, mesh)
        opt.step()
        _set_grads(sharded, plain, 2, mesh, poison_rank=world - 1)
        before = {name: (p.detach().to_local().clone(),
                         {k: _local(v).clone() for k, v in opt.state[p].items()}) for name, p in sharded.items()}
        try:
            opt.step()
        except NonFiniteGradientError as error:
            assert "parameter 0 of its group" in str(error), str(error)  # the weight, named on every rank
            raised = True
        else:
            raised = False
        assert raised != skip, f"rank {rank}: raised={raised} with skip_nonfinite={skip}"
        if skip:
            assert opt.skipped_steps == 1
        for name, p in sharded.items():
            p_before, state_before = before[name]
            assert torch.equal(p.detach().to_local(), p_before), (rank, name)
            for key, value in opt.state[p].items():
                assert torch.equal(_local(value), state_before[key]), (rank, name, key)


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def _check_grad_scaler(rank, world, mesh) -> None:
    """GradScaler hands its scale and found_inf to the sharded step: the scaled gradients are unscaled on
    load (the result matches the unsharded step on unscaled gradients), and an inf on one rank's
    shard skips the step on every rank."""
    from luminamoon.optim import LuminaV
    sharded, plain = _params(mesh)
    opts = [LuminaV(list(ps.values()), lr=LR, weight_decay=WD, backend="scalar", mode="tdclm") for ps in
            (sharded, plain)]
    scale = 1024.0
    for t in (1, 2):
        _set_grads(sharded, plain, t, mesh)
        for p in sharded.values():
            p.grad.mul_(scale)  # what scaler.scale(loss).backward() leaves
        opts[0].grad_scale = torch.tensor(scale)
        opts[0].found_inf = torch.zeros(())
        opts[0].step()
        del opts[0].grad_scale, opts[0].found_inf
        opts[1].step()
    for name in SHAPES:
        err = normwise_relative_error(sharded[name].detach().full_tensor().double().numpy(),
                                      plain[name].detach().double().numpy())
        assert err <= 1e-5, (rank, name, err)
    # found_inf set on the last rank only (what GradScaler._check_inf_per_device finds there).
    _set_grads(sharded, plain, 3, mesh)
    before = [p.detach().to_local().clone() for p in sharded.values()]
    opts[0].grad_scale = torch.tensor(scale)
    opts[0].found_inf = torch.full((), 1.0 if rank == world - 1 else 0.0)
    opts[0].step()
    assert opts[0].skipped_steps == 1, rank
    for b, p in zip(before, sharded.values()):
        assert torch.equal(b, p.detach().to_local())
    # A NaN on the last rank's shard: every rank's found_inf becomes 1 (the scaler lowers its scale),
    # and with check_finite every rank raises, as the unsharded step does.
    from luminamoon.optim import NonFiniteGradientError
    _set_grads(sharded, plain, 4, mesh, poison_rank=world - 1)
    opts[0].found_inf = torch.zeros(())
    with pytest.raises(NonFiniteGradientError):
        opts[0].step()
    assert float(opts[0].found_inf) == 1.0, rank
    for b, p in zip(before, sharded.values()):
        assert torch.equal(b, p.detach().to_local())


def _model(seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 15), torch.nn.Tanh(), torch.nn.Linear(15, 3))


def _train(model, opt, steps: range) -> None:
    for t in steps:
        x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1000 + t))
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()


CHECKPOINT_OPTIONS = dict(lr=1e-2, mode="clm", backend="scalar")


def _checkpoint_save(rank, directory) -> None:
    """FSDP2 on 4 ranks: 3 steps, a torch.distributed.checkpoint of model and optimizer, 3 more steps."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.fsdp import fully_shard

    from luminamoon.optim import LuminaV
    model = _model()
    fully_shard(model)
    opt = LuminaV(model.parameters(), **CHECKPOINT_OPTIONS)
    _train(model, opt, range(3))
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=os.path.join(directory, "ckpt"))
    _train(model, opt, range(3, 6))
    full = [p.detach().full_tensor() for p in model.parameters()]
    if rank == 0:
        torch.save(full, os.path.join(directory, "final.pt"))


def _checkpoint_resume(rank, directory) -> None:
    """The checkpoint of 4 ranks resumed on 2: the same 3 last steps give the same parameters, bit for bit
    (every rank trains on the same batch, so FSDP2's averaged gradients are the same at any world size)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import fully_shard

    from luminamoon.optim import LuminaV
    model = _model(seed=1)  # other weights: the checkpoint must bring them
    fully_shard(model)
    opt = LuminaV(model.parameters(), **CHECKPOINT_OPTIONS)
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=os.path.join(directory, "ckpt"))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    _train(model, opt, range(3, 6))
    want = torch.load(os.path.join(directory, "final.pt"))
    for p, w in zip(model.parameters(), want):
        assert torch.equal(p.detach().full_tensor(), w), f"rank {rank}: resumed run differs"


def _worker(rank: int, world: int, store: str, directory: str) -> None:
    from torch.distributed.tensor import init_device_mesh
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        for label, options, ref_options, exact in CONFIGS:
            if world == 2:  # the reference check once (world 2); the unsharded comparison at both sizes
                _check_against_reference(rank, label, options, ref_options, mesh)
            _check_against_unsharded(rank, label, options, exact, mesh)
        _check_nonfinite_on_one_rank(rank, world, mesh)
        _check_grad_scaler(rank, world, mesh)
        if world == 4:
            _checkpoint_save(rank, directory)
        else:
            _checkpoint_resume(rank, directory)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # Every check of this rank passed and its group is gone: what is left is the interpreter's exit.
    open(os.path.join(directory, f"rank{rank}-of-{world}.done"), "w").close()


@pytest.mark.timeout(300)
def test_sharded_step_on_4_then_2_ranks(tmp_path):
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for world in (4, 2):  # 4 first: it writes the checkpoint that 2 resumes
        context = mp.spawn(_worker, args=(world, str(tmp_path / f"store{world}"), str(tmp_path)), nprocs=world,
                           join=False)
        deadline = time.monotonic() + 130
        for process in context.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        # A rank that aborts with "terminate called without an active exception" after all its checks
        # passed and its process group was destroyed is gloo's teardown at interpreter exit (seen once
        # in CI, 2026-12-03, 4 ranks on 2 cores), not a wrong result. Any other failure is reported by
        # below, with the rank's traceback.
        hung = [rank for rank, p in enumerate(context.processes) if p.is_alive()]
        for rank in hung:
            context.processes[rank].kill()
        assert not hung, f"world {world}: ranks {hung} did not finish in 130 s"
        for rank, process in enumerate(context.processes):
            done = (tmp_path / f"rank{rank}-of-{world}.done").exists()
            if process.exitcode == 0 or (done and process.exitcode == -signal.SIGABRT):
                continue
            trace = ""
            if os.path.exists(context.error_files[rank]):  # torch's spawn leaves the rank's traceback there
                with open(context.error_files[rank], "rb") as f:
                    trace = pickle.load(f)
            pytest.fail(f"world {world}, rank {rank}: exit code {process.exitcode}, checks done: {done}\n{trace}")
