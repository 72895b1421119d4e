"""LuminaV as a torch.optim.Optimizer: param groups, closure, state_dict, master weights, sharded tensors.

Each ``step()`` makes one native call per device for the whole optimizer
(every group, mode and dtype): a ``StepPlan`` (Note [step plan] in
src/python/optim_step_plan.cc) describes the parameters once and reads only
the gradients' and parameters' pointers on each step. On a CUDA device the
call is asynchronous and device-resident (Note [asynchronous errors]).
Sharded DTensor parameters (FSDP2, Shard(0) placements) take the
pass-1/pass-2 route of the C API: their partial sums are all-reduced over the
parameter's process group between the rounds, so TD-CLM, the cautious mask
and the tensor bound see the whole logical tensor.

Note [asynchronous errors]: on CUDA, ``step()`` returns before the GPU has
run the step. A non-finite gradient (``check_finite``) makes the step write
nothing on the device and sets the optimizer's device status word; every
later step writes nothing either until the error is raised: by the first
``step()`` that finds the verdict already known (a pinned host copy of the
word, read without waiting), by ``synchronize()``, which waits, or at once
with ``step(sync=True)``. With ``skip_nonfinite=True`` the device skips the
step and counts it (``skipped_steps`` waits for the device). GradScaler hands
over its scale and ``found_inf`` as device tensors (``_step_supports_amp_scaling``):
gradients are unscaled on load and a step with ``found_inf`` is skipped.

Note [atomic step]: a step either updates every parameter or none. New state
is staged and committed only after success; when a step needs more than one
native call, every gradient is checked for NaN/Inf before the first call
(sharded gradients through the all-reduced count of round 0, so that every
rank reaches the same decision).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch.optim import Optimizer

from .. import _native
from .errors import NonFiniteGradientError, raise_for_status
from .functional import (_FLOAT_DTYPES, DTYPE_F32, Buffer, check_no_overlap, cuda_stream_handle,
                         describe_buffer, make_hyperparams, rows_of, run_options, td_factor_code)

__all__ = ["LuminaV"]

_MODES = {"clm": 2, "tdclm": 1}
_BOUNDS = {None: 0, "tensor": 1, "element": 2}
_F32_ONLY = frozenset({DTYPE_F32})
_STATE_F32_KEYS = ("exp_avg", "exp_avg_sq", "master")
_DTYPE_CODES = {torch.float32: DTYPE_F32, torch.bfloat16: _native.DTYPE_BF16, torch.float16: _native.DTYPE_F16}


def derive_seed(user_seed: int, position: int) -> int:
    """Per-parameter stochastic-rounding seed from the user's seed and the parameter's position.

    A SplitMix64 step over both, kept to 63 bits so that it fits the int64
    tensor it is saved in.
    """
    mask = (1 << 64) - 1
    z = (int(user_seed) * 0xD1B54A32D192ED03 + (position + 1) * 0x9E3779B97F4A7C15) & mask
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & mask
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    return z & ((1 << 63) - 1)


@dataclass
class _Shard:
    """Where a DTensor's local shard sits in the logical tensor."""

    index_offset: int
    logical_numel: int
    group: Any  # the process group of the sharded mesh dimension


@dataclass
class _Entry:
    """One parameter ready for a native call."""

    param: torch.Tensor
    name: str
    local_param: torch.Tensor
    local_grad: torch.Tensor
    state: dict
    step: int          # t of this step
    shard: _Shard | None
    buffers: list[Buffer] = field(default_factory=list)
    desc: Any = None


class _DeviceStatus:
    """One CUDA device's status word (luminav_step_status), its pinned host copy and workspace."""

    def __init__(self, device: torch.device):
        self.device = device
        self.status = torch.zeros(4, dtype=torch.int32, device=device)
        self.host = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        self.host_view = self.host.numpy()  # reading it never waits for the device
        self.workspace = torch.zeros(0, dtype=torch.uint8, device=device)
        self.cleared: torch.cuda.Event | None = None  # the copy may be stale until this event
        self.names: list[str] = []  # call position -> parameter name (the plan's order)

    def workspace_of(self, nbytes: int) -> torch.Tensor:
        if self.workspace.numel() < nbytes:  # zeroed once (luminav_groups_workspace_bytes)
            self.workspace = torch.zeros(nbytes, dtype=torch.uint8, device=self.device)
        return self.workspace

    def known_failure(self) -> int:
        """1 + the call position of a failed step the host copy already shows, else 0."""
        if self.cleared is not None:
            if not self.cleared.query():
                return 0
            self.cleared = None
        return int(self.host_view[1])

    def clear_failure(self) -> None:
        self.status[1:2].zero_()  # stream-ordered after the refused steps
        self.host_view[1] = 0
        self.cleared = torch.cuda.Event()
        self.cleared.record()


@dataclass
class _Plan:
    """The native step of one device (Note [step plan])."""

    native: Any
    device: torch.device
    names: list[str]          # call position -> parameter name
    status: _DeviceStatus | None   # CUDA
    host_status: Any          # CPU: the status word (a NumPy view), filled synchronously


def _checked_grad(p, name: str) -> torch.Tensor:
    grad = p.grad
    if grad.is_sparse or grad.layout != torch.strided:
        raise ValueError(f"{name}: LuminaV does not support sparse gradients ({grad.layout})")
    if grad.is_complex():
        raise ValueError(f"{name}: complex gradients are not supported")
    return grad


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if _is_dtensor(tensor) else tensor


_DTENSOR: list = []  # [DTensor class or None], looked up once


def _is_dtensor(tensor) -> bool:
    if not _DTENSOR:
        try:
            from torch.distributed.tensor import DTensor
        except ImportError:  # torch built without distributed
            DTensor = None
        _DTENSOR.append(DTensor)
    return _DTENSOR[0] is not None and isinstance(tensor, _DTENSOR[0])


def _shard_of(param, name: str) -> _Shard | None:
    """The shard layout of a DTensor parameter (None for a plain or replicated tensor)."""
    if not _is_dtensor(param):
        return None
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    placements = list(param.placements)
    sharded = [i for i, pl in enumerate(placements) if not isinstance(pl, Replicate)]
    if not sharded:
        return None
    if len(sharded) > 1 or not isinstance(placements[sharded[0]], Shard) or placements[sharded[0]].dim != 0:
        raise ValueError(f"{name}: DTensor placements {placements} are not supported; LuminaV handles "
                         "Shard(0) on one mesh dimension (FSDP2's layout) and Replicate")
    _, offset = compute_local_shape_and_global_offset(param.shape, param.device_mesh, placements)
    row = 1
    for size in param.shape[1:]:
        row *= size
    return _Shard(index_offset=int(offset[0]) * row if param.dim() else 0, logical_numel=param.numel(),
                  group=param.device_mesh.get_group(sharded[0]))


class LuminaV(Optimizer):
    """The LuminaV optimizer (CLM or TD-CLM), a drop-in replacement for ``torch.optim.AdamW``.

    With the defaults (``mode="clm"``, no ``tau``/``lam``/``cautious``/bound)
    it computes exactly AdamW's update. ``master_weights=None`` keeps fp32
    master weights for bf16/fp16 parameters (written back by stochastic
    rounding, keyed on a per-parameter seed saved in the state). A NaN/Inf
    gradient raises :class:`~luminamoon.optim.NonFiniteGradientError` naming
    the parameter and leaves parameters and state unchanged; with
    ``skip_nonfinite=True`` the step is skipped instead (``skipped_steps``
    counts them). State follows AdamW's names (``step``, ``exp_avg``,
    ``exp_avg_sq``; TD-CLM keeps its scalar ``s`` in ``exp_avg_sq``) plus
    ``master`` and ``seed``; an AdamW checkpoint loads and continues.

    ``mode`` is per param group: TD-CLM's one scalar per tensor suits weight
    matrices, while an output layer (or embedding) whose rows see gradients of
    very different size trains better in a CLM group of its own (see the
    README and docs/benchmarks.md).

    ``td_factor`` (TD-CLM, per param group; spec "TD-CLM second moment"):
    ``"factored"`` (default) keeps row and column factors of the parameter
    viewed as R x C (R its first dimension), ``"row"`` one number per row,
    ``"tensor"`` version 1's scalar. ``exp_avg_sq`` holds them (row, then
    col), sized by luminav_exp_avg_sq_length; a version 1 TD-CLM checkpoint
    (no ``td_factor`` in its groups) loads as ``"tensor"``.
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, mode: str = "clm", tau: float = 0.0,
                 lam: float = 0.0, cautious: bool = False, bound: str | None = None,
                 bound_ratio: float | None = None, master_weights: bool | None = None,
                 stochastic_rounding: bool = True, seed: int = 0, check_finite: bool = True,
                 backend: str = "auto", *, skip_nonfinite: bool = False, td_factor: str = "factored",
                 capturable: bool = False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, mode=mode, tau=tau,
                        lam=lam, cautious=bool(cautious), bound=bound, bound_ratio=bound_ratio,
                        master_weights=master_weights, stochastic_rounding=bool(stochastic_rounding),
                        seed=int(seed), check_finite=bool(check_finite), backend=backend,
                        td_factor=td_factor, capturable=bool(capturable))
        self.skip_nonfinite = bool(skip_nonfinite)
        self._host_skipped = 0
        self.last_native_calls = 0
        self._names: dict[tuple[int, int], str] = {}
        self._prepared: dict = {}  # Note [prepared buffers]
        self._plans: list[_Plan] | None = None  # None: describe anew on the next step
        self._created: list = []  # parameters whose state the step in progress created
        self._devices: dict[int, _DeviceStatus] = {}
        super().__init__(params, defaults)

    # GradScaler hands over its scale and found_inf instead of unscaling (torch's fused optimizers).
    _step_supports_amp_scaling = True

    @property
    def skipped_steps(self) -> int:
        """Steps skipped (skip_nonfinite, GradScaler's found_inf); waits for the devices."""
        self.synchronize(raise_errors=False)
        return self._host_skipped + sum(int(d.host_view[2]) for d in self._devices.values())

    @skipped_steps.setter
    def skipped_steps(self, value: int) -> None:
        self.synchronize(raise_errors=False)
        self._host_skipped = int(value) - sum(int(d.host_view[2]) for d in self._devices.values())

    def synchronize(self, raise_errors: bool = True) -> None:
        """Waits for every device step enqueued so far; raises a pending NonFiniteGradientError."""
        for d in self._devices.values():
            torch.cuda.synchronize(d.device)
        if raise_errors:
            self._raise_pending()

    def _raise_pending(self) -> None:
        for d in self._devices.values():
            failed = d.known_failure()
            if failed:
                d.clear_failure()
                name = d.names[failed - 1] if failed - 1 < len(d.names) else f"tensor {failed - 1}"
                raise NonFiniteGradientError(
                    f"NaN or Inf in the gradient of {name} (found on {d.device}); that step and every step "
                    "after it until now wrote nothing; parameters and optimizer state are as before it", name)

    # ---- groups ---------------------------------------------------------------------

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self._plans = None
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            for i, p in enumerate(group["params"]):
                if p.is_complex():
                    raise ValueError(f"{self._name(group, i)}: complex parameters are not supported "
                                     f"(dtype {p.dtype})")
                if p.layout != torch.strided:
                    raise ValueError(f"{self._name(group, i)}: {p.layout} parameters are not supported")
                if p.dtype not in (torch.float32, torch.bfloat16, torch.float16):
                    raise ValueError(f"{self._name(group, i)}: dtype {p.dtype} is not supported "
                                     "(float32, bfloat16, float16)")
            # Hyperparameter ranges are the C library's to check: a call with no tensors validates them.
            status, message = _native.step_multi(self._hyperparams(group, 1), [], _native.RunOptions("auto"))
            raise_for_status(status, message)
        except Exception:
            self.param_groups.pop()
            raise

    @staticmethod
    def _hyperparams(group: dict, step: int):
        if group["mode"] not in _MODES:
            raise ValueError(f"mode must be 'clm' or 'tdclm' (got {group['mode']!r})")
        td_factor_code(group["td_factor"])  # a ValueError naming the choices
        if group["bound"] not in _BOUNDS:
            raise ValueError(f"bound must be None, 'tensor' or 'element' (got {group['bound']!r})")
        ratio = group["bound_ratio"]
        if group["bound"] is not None and ratio is None:
            raise ValueError(f"bound_ratio is required with bound={group['bound']!r}")
        beta1, beta2 = group["betas"]
        return make_hyperparams(
            lr=float(group["lr"]), beta1=float(beta1), beta2=float(beta2), eps=group["eps"],
            weight_decay=group["weight_decay"], tau=group["tau"], lam=group["lam"],
            buffer_mode=_MODES[group["mode"]], cautious=group["cautious"], bound_mode=_BOUNDS[group["bound"]],
            bound_ratio=0.0 if ratio is None else ratio, step=step, check_finite=group["check_finite"],
            stochastic_rounding=group["stochastic_rounding"])

    def _cached_name(self, group: dict, index: int) -> str:
        # Names are for messages; building them for every parameter of every step costs.
        key = (id(group), index)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self._name(group, index)
        return name

    @staticmethod
    def _name(group: dict, index: int) -> str:
        names = group.get("param_names")
        if names is not None and index < len(names):
            return f"parameter '{names[index]}'"
        p = group["params"][index]
        return f"parameter {index} of its group (shape {tuple(p.shape)}, {p.dtype})"

    def _position(self, param) -> int:
        position = 0
        for group in self.param_groups:
            for p in group["params"]:
                if p is param:
                    return position
                position += 1
        raise KeyError("parameter not in this optimizer")

    # ---- state ----------------------------------------------------------------------

    def _new_state(self, group: dict, param: torch.Tensor) -> dict:
        wants_master = group["master_weights"]
        if wants_master is None:
            wants_master = param.dtype in (torch.bfloat16, torch.float16)
        state = {
            # fp32 on the parameter's device, as torch's capturable/fused AdamW keeps it: a
            # device step reads and advances it without the host (spec "Asynchronous devices").
            "step": torch.zeros((), dtype=torch.float32, device=_local(param).device),
            "exp_avg": torch.zeros_like(param, dtype=torch.float32, memory_format=torch.contiguous_format),
            "exp_avg_sq": (torch.zeros_like(param, dtype=torch.float32, memory_format=torch.contiguous_format)
                           if group["mode"] == "clm" else
                           torch.zeros((), dtype=torch.float32, device=_local(param).device)
                           if group["td_factor"] == "tensor" else
                           torch.zeros(self._second_moment_length(group, param), dtype=torch.float32,
                                       device=_local(param).device)),
            "seed": torch.tensor(derive_seed(group["seed"], self._position(param)), dtype=torch.int64),
        }
        if wants_master and param.dtype != torch.float32:
            state["master"] = param.detach().to(dtype=torch.float32, memory_format=torch.contiguous_format,
                                                copy=True)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Loads a LuminaV or AdamW state dict; fp32 state stays fp32 (torch would cast it to the param dtype)."""
        saved_groups = state_dict["param_groups"]
        id_map = {old_id: p for old, new in zip(saved_groups, self.param_groups)
                  for old_id, p in zip(old["params"], new["params"])}
        saved_state = state_dict["state"]
        version1 = [g.get("mode") == "tdclm" and "td_factor" not in g for g in saved_groups]
        super().load_state_dict(state_dict)
        self._names.clear()  # the groups are new dicts (and may bring param_names)
        self._prepared.clear()
        self._plans = None
        for group, old in zip(self.param_groups, version1):
            if old:  # a version 1 TD-CLM checkpoint: its scalar s stays td_factor "tensor"
                group["td_factor"] = "tensor"
            for key, value in self.defaults.items():
                group.setdefault(key, value)  # an AdamW group lacks LuminaV's options
        for old_id, p in id_map.items():
            if old_id not in saved_state:
                continue
            original, state = saved_state[old_id], self.state[p]
            group = next(g for g in self.param_groups if any(q is p for q in g["params"]))
            for key in _STATE_F32_KEYS:
                if key in original:
                    state[key] = original[key].detach().to(device=p.device, dtype=torch.float32, copy=True)
            state["step"] = torch.tensor(float(original.get("step", 0)), dtype=torch.float32,
                                         device=_local(p).device)
            if "seed" in original:  # torch casts it to the parameter's dtype: take the saved integer
                state["seed"] = torch.as_tensor(original["seed"]).to(torch.int64).clone()
            else:
                state["seed"] = torch.tensor(derive_seed(group["seed"], self._position(p)), dtype=torch.int64)
            if group["mode"] == "tdclm" and group["td_factor"] == "tensor" and state["exp_avg_sq"].numel() != 1:
                # An AdamW (or CLM) checkpoint: s estimates mean(g^2), the mean of v.
                state["exp_avg_sq"] = _local(state["exp_avg_sq"]).mean().reshape(()).clone()
            elif group["mode"] == "tdclm" and group["td_factor"] != "tensor" and \
                    state["exp_avg_sq"].numel() == _local(p).numel() != self._second_moment_length(group, p):
                # An AdamW (or CLM) checkpoint: v's row means (and column means) are the factors.
                v = _local(state["exp_avg_sq"]).reshape(rows_of(_local(p).shape), -1)
                factors = [v.mean(dim=1)] + ([v.mean(dim=0)] if group["td_factor"] == "factored" else [])
                state["exp_avg_sq"] = torch.cat(factors).contiguous()
            if "master" not in state and p.dtype != torch.float32 and (
                    group["master_weights"] or group["master_weights"] is None):
                state["master"] = p.detach().to(torch.float32, copy=True)

    # ---- the step -------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None, *, sync: bool = False):
        """One optimizer step (AdamW's closure convention); returns the closure's loss.

        On CUDA it returns before the device has run the step (Note [asynchronous errors]);
        ``sync=True`` waits and raises a non-finite gradient's error at once.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._native_step(sync)
        return loss

    # Note [compiled step]: torch.compile(opt.step) traces the closure and meets this as one
    # opaque call (one graph break per step, none per parameter): the step reads pointers and
    # launches native work that no graph could represent.
    @torch.compiler.disable
    def _native_step(self, sync: bool) -> None:
        self._raise_pending()
        grad_scale = getattr(self, "grad_scale", None)
        found_inf = getattr(self, "found_inf", None)
        try:
            for _ in range(3):
                if self._plans is None:
                    self._plans = self._describe_plans()
                if self._plans == "sharded":
                    if grad_scale is not None or found_inf is not None:
                        raise NotImplementedError("GradScaler with sharded (DTensor) parameters is not supported yet")
                    self._plans = None
                    self._step_sharded()
                    break
                if self._run_plans(self._plans, grad_scale, found_inf):
                    break
                self._plans = None  # stale: describe anew (Note [step plan])
            else:
                raise RuntimeError("LuminaV: the parameters changed while the step was described")
        except BaseException:
            # A step that failed before the device took it leaves no new state behind.
            for p in self._created:
                self.state.pop(p, None)
            self._created.clear()
            self._plans = None
            raise
        self._created.clear()
        if sync:
            self.synchronize()

    def _run_plans(self, plans: list[_Plan], grad_scale, found_inf) -> bool:
        """One native call per device; False when a description is stale."""
        self.last_native_calls = len(plans)
        for plan in plans:
            stream = 0
            if plan.status is not None:
                stream = torch._C._cuda_getCurrentRawStream(plan.device.index)
            gs = grad_scale.data_ptr() if grad_scale is not None else 0
            fi = found_inf.data_ptr() if found_inf is not None else 0
            code, message, position = plan.native.step(stream, gs, fi, self.skip_nonfinite)
            if code == _native.PLAN_REBUILD:
                return False
            if code == _native.STATUS_OK:
                if plan.host_status is not None and plan.host_status[0] != 0:  # skipped on the host
                    self._host_skipped += 1
                    plan.host_status[0] = 0
                continue
            if code == _native.STATUS_NONFINITE_GRAD and plan.host_status is not None:
                verdict = int(plan.host_status[0])
                plan.host_status[0] = 0
                name = plan.names[verdict - 1] if 0 < verdict <= len(plan.names) else "a parameter"
                raise NonFiniteGradientError(f"NaN or Inf in the gradient of {name} ({message}); "
                                             "parameters and optimizer state are unchanged", name)
            if position >= 0:
                message = f"{self._name_at(position)}: {message}"
            raise_for_status(code, message)
        return True

    def _name_at(self, position: int) -> str:
        for group in self.param_groups:
            if position < len(group["params"]):
                return self._cached_name(group, position)
            position -= len(group["params"])
        return f"parameter {position}"

    def _describe_plans(self):
        """Validates every parameter with a gradient and builds one StepPlan per device (Note [step plan])."""
        per_device: dict[torch.device, dict] = {}
        fresh_steps: dict = {}
        position = 0
        for group in self.param_groups:
            hp = self._hyperparams(group, 1)  # the step count comes from the step counters
            for pi, p in enumerate(group["params"]):
                flat = position
                position += 1
                if _is_dtensor(p):
                    return "sharded"
                where = per_device.setdefault(p.device, {"groups": {}, "excluded": []})
                if p.grad is None:
                    where["excluded"].append(p)
                    continue
                name = self._cached_name(group, pi)
                grad = _checked_grad(p, name)
                if grad.device != p.device:
                    raise ValueError(f"{name}: the gradient is on {grad.device}, the parameter on {p.device}")
                state = self.state.get(p)
                if not state:
                    state = self.state[p] = self._new_state(group, p)
                    self._created.append(p)
                    # New states of a group and device share one step counter (no device read to
                    # find that they are equal: _step_buckets).
                    state["step"] = fresh_steps.setdefault((id(group), p.device), state["step"])
                self._check_state(group, p, state, name)
                entry = _Entry(p, name, p, grad, state, 0, None)
                self._state_buffers(entry, state.get("master"))  # validates dtypes, sizes, devices
                if state["step"].device != p.device or state["step"].dtype != torch.float32:
                    state["step"] = state["step"].to(device=p.device, dtype=torch.float32)
                where["groups"].setdefault(id(group), (group, hp, []))[2].append((p, state, flat, name))
        plans = []
        for device, where in per_device.items():
            plans.append(self._plan_for(device, where))
        return plans

    def _plan_for(self, device: torch.device, where: dict) -> _Plan:
        is_cuda = device.type == "cuda"
        status = None
        if is_cuda:
            index = device.index if device.index is not None else torch.cuda.current_device()
            status = self._devices.get(index)
            if status is None:
                status = self._devices[index] = _DeviceStatus(torch.device("cuda", index))
        backends = {group["backend"] for group, _, _ in where["groups"].values()}
        if len(backends) > 1:
            raise ValueError(f"param groups on {device} name different backends {sorted(backends)}; "
                             "one device takes one backend per step")
        backend = backends.pop() if backends else "auto"
        if is_cuda and backend == "auto":
            backend = "cuda"
        device_type = _native.DEVICE_CPU
        if is_cuda:
            device_type = _native.DEVICE_ROCM if getattr(torch.version, "hip", None) else _native.DEVICE_CUDA
        native = _native.StepPlan(backend, device_type, status.device.index if is_cuda else 0)
        names: list[str] = []
        for group, hp, entries in where["groups"].values():
            for step, bucket in self._step_buckets(entries):
                lr = group["lr"]
                lr_tensor, lr_dtype = None, 0
                if (is_cuda and torch.is_tensor(lr) and lr.device == device and lr.numel() == 1
                        and lr.dtype in (torch.float32, torch.float64) and lr.is_contiguous()):
                    lr_tensor, lr_dtype = lr, (1 if lr.dtype == torch.float64 else 0)
                factor = td_factor_code(group["td_factor"])
                native.add_group(group, hp, [(p, p.dtype, state, flat, _DTYPE_CODES[p.dtype], int(state["seed"]),
                                              rows_of(p.shape), factor)
                                             for p, state, flat, _ in bucket], step, lr_tensor, lr_dtype)
                names.extend(name for _, _, _, name in bucket)
        native.add_excluded(where["excluded"])
        host_status = None
        if is_cuda:
            status.names = names
            workspace = status.workspace_of(native.workspace_bytes())
            native.set_async(status.status.data_ptr(), status.host.data_ptr(), workspace.data_ptr(),
                             workspace.numel())
        else:
            word = torch.zeros(4, dtype=torch.int32)
            native.set_async(word.data_ptr(), 0, 0, 0)
            host_status = word.numpy()  # keeps `word` alive
        return _Plan(native, device, names, status, host_status)

    @staticmethod
    def _step_buckets(entries):
        """Entries grouped by step count, each group sharing one fp32 step counter tensor."""
        steps = [state["step"] for _, state, _, _ in entries]
        if all(t is steps[0] for t in steps):
            return [(steps[0], entries)]
        # Distinct counters (a loaded checkpoint): their values, read once per description.
        distinct = list({id(t): t for t in steps}.values())
        value_of = dict(zip((id(t) for t in distinct), torch.stack([t.reshape(()) for t in distinct]).tolist()))
        values = [value_of[id(t)] for t in steps]
        buckets: dict[float, list] = {}
        for value, entry in zip(values, entries):
            buckets.setdefault(value, []).append(entry)
        out = []
        for value, bucket in buckets.items():
            shared = torch.full((), value, dtype=torch.float32, device=bucket[0][0].device)
            for _, state, _, _ in bucket:
                state["step"] = shared
            out.append((shared, bucket))
        return out

    def _step_sharded(self) -> None:
        """The pass-split route of DTensor parameters (one native call per tensor and round)."""
        entries_by_group, staged = self._collect()
        try:
            self._run(entries_by_group)
        except NonFiniteGradientError:
            if not self.skip_nonfinite:
                raise
            self._host_skipped += 1
            return
        for p, state in staged.items():
            self.state[p] = state
        for entries in entries_by_group.values():
            for e in entries:
                e.state["step"].fill_(e.step)

    def _collect(self):
        """Validates every parameter with a gradient; stages new state (committed on success)."""
        entries_by_group: dict[int, list[_Entry]] = {}
        staged: dict[torch.Tensor, dict] = {}
        for gi, group in enumerate(self.param_groups):
            entries = []
            for pi, p in enumerate(group["params"]):
                if p.grad is None:
                    continue
                name = self._cached_name(group, pi)
                grad = _checked_grad(p, name)
                state = self.state.get(p)
                committed = bool(state)
                if not committed:
                    state = staged[p] = self._new_state(group, p)
                self._check_state(group, p, state, name)
                local_p, local_g = _local(p), _local(grad)
                if not local_g.is_contiguous():
                    local_g = local_g.contiguous()  # read-only: a dense copy is as good
                shard = _shard_of(p, name)
                entry = _Entry(p, name, local_p, local_g, state, int(state["step"]) + 1, shard)
                self._describe(entry, committed, group["td_factor"])
                entries.append(entry)
            if entries:
                entries_by_group[gi] = entries
        return entries_by_group, staged

    @staticmethod
    def _second_moment_length(group, p) -> int:
        """exp_avg_sq's floats for this parameter (shard): luminav_exp_avg_sq_length."""
        local = _local(p)
        return _native.exp_avg_sq_length(local.numel(), rows_of(local.shape), _MODES[group["mode"]],
                                          td_factor_code(group["td_factor"]))

    @classmethod
    def _check_state(cls, group, p, state, name):
        # CLM's v is shaped (and sharded) like p; TD-CLM's factors are this shard's own.
        want = p.numel() if group["mode"] == "clm" else \
            cls._second_moment_length(group, p) if p.numel() else state["exp_avg_sq"].numel()
        if state["exp_avg_sq"].numel() != want:
            raise ValueError(f"{name}: exp_avg_sq holds {state['exp_avg_sq'].numel()} values but mode "
                             f"{group['mode']!r} (td_factor {group['td_factor']!r}) needs {want}; the mode "
                             "cannot change during training")

    def _describe(self, e: _Entry, committed: bool, td_factor: str) -> None:
        """Validates the buffers of one parameter and builds its native descriptor.

        Note [prepared buffers]: the parameter and state buffers rarely change
        between steps; their checked views are cached per parameter under a
        signature (pointers, identities, dtype, layout) and rebuilt when it
        changes. Gradients are checked on every step. Only committed state is
        cached (staged state may be discarded by a failing step).
        """
        p = e.local_param
        state = e.state
        master = state.get("master")
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        cacheable = committed and e.shard is None and not _is_dtensor(e.param)
        signature = None
        if cacheable:
            signature = (p.data_ptr(), p.dtype, p.is_contiguous(), p.device, id(exp_avg), exp_avg.data_ptr(),
                         id(exp_avg_sq), exp_avg_sq.data_ptr(), id(master),
                         master.data_ptr() if master is not None else 0)
        prepared = self._prepared.get(e.param) if cacheable else None
        if prepared is not None and prepared[0] == signature:
            param, exp_avg_buf, exp_avg_sq_buf, master_buf, seed = prepared[1]
        else:
            param, exp_avg_buf, exp_avg_sq_buf, master_buf = self._state_buffers(e, master)
            seed = int(state["seed"])
            if cacheable:
                self._prepared[e.param] = (signature, (param, exp_avg_buf, exp_avg_sq_buf, master_buf, seed))
        if e.local_grad.device != p.device:
            raise ValueError(f"{e.name}: the gradient is on {e.local_grad.device}, the parameter on {p.device}")
        grad = describe_buffer(e.local_grad, f"{e.name}.grad", _FLOAT_DTYPES, writable=False)
        if grad.numel != param.numel:
            raise ValueError(f"{grad.name} has {grad.numel} elements but the parameter (shard) has {param.numel}")
        e.buffers = [b for b in (param, grad, exp_avg_buf, exp_avg_sq_buf, master_buf) if b is not None]
        e.desc = _native.TensorDesc(param.ptr, grad.ptr, exp_avg_buf.ptr, exp_avg_sq_buf.ptr,
                                    master_buf.ptr if master_buf else 0, param.numel,
                                    e.shard.index_offset if e.shard else 0, seed, param.dtype, grad.dtype,
                                    rows_of(p.shape), td_factor_code(td_factor))

    @staticmethod
    def _state_buffers(e: _Entry, master) -> tuple:
        p = e.local_param
        if p.device.type not in ("cpu", "cuda"):
            accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
            what = " (this machine's torch.accelerator)" if accelerator == p.device.type else ""
            raise ValueError(f"{e.name} is on device '{p.device}'{what}, which no LuminaV backend serves "
                             "(supported: cpu, cuda)")
        param = describe_buffer(p, f"{e.name}.param", _FLOAT_DTYPES, writable=True)
        exp_avg = describe_buffer(_local(e.state["exp_avg"]), f"{e.name}.exp_avg", _F32_ONLY, writable=True)
        exp_avg_sq = describe_buffer(_local(e.state["exp_avg_sq"]), f"{e.name}.exp_avg_sq", _F32_ONLY,
                                     writable=True)
        master_buf = (describe_buffer(_local(master), f"{e.name}.master", _F32_ONLY, writable=True)
                      if master is not None else None)
        buffers = [b for b in (param, exp_avg, exp_avg_sq, master_buf) if b is not None]
        for b in (exp_avg, master_buf):
            if b is not None and b.numel != param.numel:
                raise ValueError(f"{b.name} has {b.numel} elements but the parameter (shard) has {param.numel}")
        if len({b.device_label for b in buffers}) != 1:
            raise ValueError(f"{e.name}: parameter and state are on different devices: "
                             + ", ".join(f"{b.name} on {b.device_label}" for b in buffers))
        return param, exp_avg, exp_avg_sq, master_buf

    def _run(self, entries_by_group: dict[int, list[_Entry]]) -> None:
        calls = []      # (group, hp, entries, options): one native multi-tensor call each
        sharded = []    # (group, hp, entries, options): the pass-split route
        for gi, entries in entries_by_group.items():
            group = self.param_groups[gi]
            buckets: dict[tuple, list[_Entry]] = {}
            for e in entries:
                key = (e.buffers[0].device_label, e.step, e.shard is not None)
                buckets.setdefault(key, []).append(e)
            for (label, t, is_sharded), bucket in buckets.items():
                hp = self._hyperparams(group, t)
                first = bucket[0].buffers[0]
                stream = cuda_stream_handle(first.device_index) if label.startswith("cuda") else 0
                options = run_options(first.device_type, first.device_index, group["backend"], stream)
                (sharded if is_sharded else calls).append((group, hp, bucket, options))

        native_calls = len(calls) + sum(len(item[2]) for item in sharded)
        if native_calls > 1:
            # The library refuses overlapping buffers within one native call; only this check
            # sees overlaps across calls (groups, devices, step counts, sharded tensors).
            check_no_overlap([b for entries in entries_by_group.values() for e in entries for b in e.buffers])
        # Pass 1 of sharded tensors (collectives; every rank reaches the same verdict).
        sharded_globals = [self._sharded_globals(*item) for item in sharded]
        if len(calls) > 1 or (calls and sharded):
            self._check_finite_first(calls)
        for (group, hp, bucket, options), globals_ in zip(sharded, sharded_globals):
            for e, g in zip(bucket, globals_):
                status, message = _native.apply(hp, e.desc, g, options)
                raise_for_status(status, message)
        self.last_native_calls = native_calls
        for group, hp, bucket, options in calls:
            status, message = _native.step_multi(hp, [e.desc for e in bucket], options)
            if status == _native.STATUS_NONFINITE_GRAD:
                self._raise_nonfinite(bucket, message)
            raise_for_status(status, message)

    def _check_finite_first(self, calls) -> None:
        for group, _, bucket, _ in calls:
            if group["check_finite"]:
                bad = [e for e in bucket if not bool(torch.isfinite(e.local_grad).all())]
                if bad:
                    self._raise_nonfinite(bad, "non-finite gradient; nothing was written")

    @staticmethod
    def _raise_nonfinite(entries: list[_Entry], message: str):
        bad = [e.name for e in entries if not bool(torch.isfinite(e.local_grad).all())] or \
              [e.name for e in entries]
        raise NonFiniteGradientError(f"NaN or Inf in the gradient of {', '.join(bad)} ({message}); "
                                     "parameters and optimizer state are unchanged", bad[0])

    def _sharded_globals(self, group, hp, bucket: list[_Entry], options) -> list:
        """Pass 1 of sharded parameters: reduce, all-reduce (SUM) over each process group, finalize."""
        import torch.distributed as dist
        rounds = _native.reduction_rounds(hp)
        if rounds < 0:
            raise_for_status(-rounds, "invalid hyperparameters")
        globals_ = [_native.Globals() for _ in bucket]
        s_old = [float(_local(e.state["exp_avg_sq"]).reshape(-1)[0]) if group["mode"] == "tdclm" else 0.0
                 for e in bucket]
        if rounds == 0:
            for i, e in enumerate(bucket):
                status, message, globals_[i] = _native.finalize(hp, _native.Partials(), e.shard.logical_numel,
                                                                0, s_old[i], globals_[i])
                raise_for_status(status, message)
            return globals_
        by_group: dict[Any, list[int]] = {}
        for i, e in enumerate(bucket):
            by_group.setdefault(e.shard.group, []).append(i)
        for r in range(rounds):
            rows = []
            for i, e in enumerate(bucket):
                status, message, part = _native.reduce(hp, e.desc, r, globals_[i], options)
                raise_for_status(status, message)
                rows.append([part.nonfinite_count, part.agree_count, part.grad_sq_sum, part.update_sq_sum,
                             part.weight_sq_sum])
            # float64 carries the counts exactly below 2^53 elements.
            packed = torch.tensor(rows, dtype=torch.float64)
            for pg, idx in by_group.items():
                device = "cuda" if dist.get_backend(pg) == "nccl" else "cpu"
                part_sum = packed[idx].to(device)
                dist.all_reduce(part_sum, op=dist.ReduceOp.SUM, group=pg)
                packed[idx] = part_sum.cpu()
            verdicts = []
            for i, e in enumerate(bucket):
                total = _native.Partials()
                total.nonfinite_count, total.agree_count = int(packed[i, 0]), int(packed[i, 1])
                total.grad_sq_sum, total.update_sq_sum, total.weight_sq_sum = (float(v) for v in packed[i, 2:])
                status, message, globals_[i] = _native.finalize(hp, total, e.shard.logical_numel, r, s_old[i],
                                                                globals_[i])
                verdicts.append((status, message, e))
            for status, message, e in verdicts:
                if status == _native.STATUS_NONFINITE_GRAD:
                    raise NonFiniteGradientError(f"NaN or Inf in the gradient of {e.name} (sharded; {message}); "
                                                 "parameters and optimizer state are unchanged", e.name)
                raise_for_status(status, message)
        return globals_
