"""LuminaV as a torch.optim.Optimizer: param groups, closure, state_dict, master weights, sharded tensors.

Each ``step()`` makes one native call per device for the whole optimizer
(every group, mode and dtype): a ``StepPlan`` (Note [step plan] in
src/python/optim_step_plan.cc) describes the parameters once and reads only
the gradients' and parameters' pointers on each step. On a CUDA device the
call is asynchronous and device-resident (Note [asynchronous errors]).
Sharded DTensor parameters (FSDP2, Shard(0) placements) get one plan per
device and process group, run in phases (Note [sharded step]).

Note [sharded step]: the plan's native phases write every tensor's pass-1
partials (finite verdict, sums, TD-CLM's column and row-factor sums, the
cautious and bound sums, GradScaler's found_inf) into one float64 exchange
tensor on the parameters' device; one ``dist.all_reduce`` per exchange (one
for CLM, two for TD-CLM with the cautious mask or the tensor bound, whose
sums need the second moment) adds the shards' partials, stream-ordered on
NCCL (no host synchronisation) and in place on gloo; the next phase folds the
reduced values on the device and the last one applies. Every rank folds the
same numbers, so a NaN on one rank's shard makes every rank write nothing
and report it, so TD-CLM, the cautious mask and the tensor bound see the
whole logical tensor.

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

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
from torch.optim import Optimizer
from torch.optim import optimizer as _torch_optimizer

from .. import _native
from .errors import NonFiniteGradientError, raise_for_status
from .functional import (_FLOAT_DTYPES, BOUND_MODES, DTYPE_F32, describe_buffer, make_hyperparams, rows_of,
                         td_factor_code)

__all__ = ["LuminaV"]

_MODES = {"clm": 2, "tdclm": 1}
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
    group: Any = None         # sharded: the process group the exchange is all-reduced over (None: one rank)
    exchange: Any = None      # sharded: the float64 exchange tensor (Note [sharded step])
    exchanges: int = 0        # sharded: all-reduces per step
    workspace: Any = None     # sharded on the host: the workspace the phases share


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


def _step_hooks_or_profiler(opt: Optimizer) -> bool:
    """True when a step must run torch's wrapper semantics (Note [lean step wrapper])."""
    return bool(opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks
                or _torch_optimizer._global_optimizer_pre_hooks or _torch_optimizer._global_optimizer_post_hooks
                or torch.autograd._profiler_enabled())


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
    ``exp_avg_sq``; TD-CLM keeps its second-moment factors in ``exp_avg_sq``)
    plus ``master`` and ``seed``; an AdamW checkpoint loads and continues.

    ``mode`` is per param group. For TD-CLM (``mode="tdclm"``) we suggest
    ``tau=0.5, cautious=True, cautious_until=400``: the spec's cautious mask
    for the first 400 steps, then off (``cautious_until`` is beyond the spec;
    Note [mask schedule]). On a 98M Llama model every such run left the early
    loss plateau by step 130 (AdamW's runs left it late about one time in
    four), its held-out loss after 1,500 fresh batches was within 0.1% of
    AdamW's runs that left early (9 runs, 3 calls, H100) and 3.3% below AdamW
    in calls where AdamW left late; on an H200, -0.44% against an AdamW all
    early and -3.82% against one all late; on repeated batches its training
    loss was 25-53% below AdamW's. Kept to the end, the mask's N/K scale costs 2-3%
    late; without the mask (the spec's default, which stays the default here)
    TD-CLM was 2.4-2.7% above AdamW. Keep the embedding and output layer
    ``"factored"`` too (README; docs/benchmarks.md, rows T3, T3m, T3o-T3s,
    T8i, T8j).

    ``td_factor`` (TD-CLM, per param group; spec "TD-CLM second moment"):
    ``"factored"`` (default) keeps row and column factors of the parameter
    viewed as R x C (R its first dimension), ``"row"`` one number per row,
    ``"tensor"`` version 1's scalar. ``exp_avg_sq`` holds them (row, then
    col), sized by luminav_exp_avg_sq_length; a version 1 TD-CLM checkpoint
    (no ``td_factor`` in its groups) loads as ``"tensor"``.

    ``bound`` (per param group, with ``bound_ratio``): ``"tensor"`` (a trust
    region on ``||lr*u|| / ||x||``), ``"element"`` (each element's step), or
    ``"rms"``, an option beyond the spec: Adafactor's update clipping on
    LuminaV's update, ``u <- u / max(1, RMS(u) / bound_ratio)`` per tensor
    (``bound_ratio=1.0`` is Adafactor's d = 1). For TD-CLM on repeated data
    (docs/benchmarks.md, row T8).
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, mode: str = "clm", tau: float = 0.0,
                 lam: float = 0.0, cautious: bool = False, bound: str | None = None,
                 bound_ratio: float | None = None, master_weights: bool | None = None,
                 stochastic_rounding: bool = True, seed: int = 0, check_finite: bool = True,
                 backend: str = "auto", *, skip_nonfinite: bool = False, td_factor: str = "factored",
                 capturable: bool = False, cautious_until: int | None = None):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, mode=mode, tau=tau,
                        lam=lam, cautious=bool(cautious), bound=bound, bound_ratio=bound_ratio,
                        master_weights=master_weights, stochastic_rounding=bool(stochastic_rounding),
                        seed=int(seed), check_finite=bool(check_finite), backend=backend,
                        td_factor=td_factor, capturable=bool(capturable), cautious_until=cautious_until)
        if cautious_until is not None and not cautious:
            raise ValueError("cautious_until ends the cautious mask: it needs cautious=True")
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
            until = group["cautious_until"]
            if until is not None:
                if isinstance(until, bool) or not isinstance(until, int) or until < 0:
                    raise ValueError(f"cautious_until must be None or a step count >= 0 (got {until!r})")
                group.setdefault("cautious_steps", 0)
                self._end_mask_when_done(group)  # cautious_until=0: no masked step
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
        if group["bound"] not in BOUND_MODES:
            raise ValueError(f"bound must be None, 'tensor', 'element' or 'rms' (got {group['bound']!r})")
        if group["bound"] == "rms" and group["backend"] == "triton":
            raise ValueError("bound='rms' has no Triton kernel (the cuda, simd and scalar backends run it)")
        ratio = group["bound_ratio"]
        if group["bound"] is not None and ratio is None:
            raise ValueError(f"bound_ratio is required with bound={group['bound']!r}")
        beta1, beta2 = group["betas"]
        return make_hyperparams(
            lr=float(group["lr"]), beta1=float(beta1), beta2=float(beta2), eps=group["eps"],
            weight_decay=group["weight_decay"], tau=group["tau"], lam=group["lam"],
            buffer_mode=_MODES[group["mode"]], cautious=group["cautious"], bound_mode=BOUND_MODES[group["bound"]],
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

    # Note [lean step wrapper]: torch.optim wraps every Optimizer subclass's step()
    # (profile_hook_step): a record_function scope and the two hook chains on each call,
    # ~30 us of host time (more on a busy host), about what LuminaV's whole native step
    # costs, and paid before its first kernel is enqueued. LuminaV's step() keeps the same
    # contract itself: the hooks torch registers (the optimizer's and the global ones) run
    # in torch's order with torch's arguments, and the profiler scope, with torch's name,
    # opens while a profiler records. With none of them, a step is one check and the
    # native call. `hooked` tells torch that this step needs no wrapper (set below the class).
    def step(self, closure: Callable[[], Any] | None = None, *, sync: bool = False):
        """One optimizer step (AdamW's closure convention); returns the closure's loss.

        On CUDA it returns before the device has run the step (Note [asynchronous errors]);
        ``sync=True`` waits and raises a non-finite gradient's error at once.
        """
        if (closure is None and not torch.compiler.is_compiling() and not _step_hooks_or_profiler(self)):
            self._native_step(sync)
            return None
        # The hooks see the call as torch's wrapper would: (self, *positional), keywords given.
        return self._step_with_hooks((self,) if closure is None else (self, closure), {"sync": True} if sync else {})

    def _step_with_hooks(self, args: tuple, kwargs: dict):
        with torch.autograd.profiler.record_function(f"Optimizer.step#{type(self).__name__}.step"):
            for hook in (*_torch_optimizer._global_optimizer_pre_hooks.values(),
                         *self._optimizer_step_pre_hooks.values()):
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(f"an optimizer step pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {result}.")
                    args, kwargs = result
            loss = self._closure_and_step(*args[1:], **kwargs)
            for hook in (*self._optimizer_step_post_hooks.values(),
                         *_torch_optimizer._global_optimizer_post_hooks.values()):
                hook(self, args, kwargs)
        return loss

    def _closure_and_step(self, closure: Callable[[], Any] | None = None, *, sync: bool = False):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if torch.compiler.is_compiling():
            self._compiled_native_step(sync)
        else:
            self._native_step(sync)
        return loss

    # Note [compiled step]: torch.compile(opt.step) traces the closure and meets the native
    # step as one opaque call (one graph break per step, none per parameter): the step reads
    # pointers and launches native work that no graph could represent.
    @torch.compiler.disable
    def _compiled_native_step(self, sync: bool) -> None:
        self._native_step(sync)

    def _native_step(self, sync: bool) -> None:
        self._raise_pending()
        grad_scale = getattr(self, "grad_scale", None)
        found_inf = getattr(self, "found_inf", None)
        try:
            for _ in range(3):
                if self._plans is None:
                    with torch.no_grad():  # new state tensors are not part of any graph
                        self._plans = self._describe_plans()
                if self._run_plans(self._plans, grad_scale, found_inf):
                    break
                self._plans = None  # stale: describe anew (Note [step plan])
            else:
                raise RuntimeError("LuminaV: the parameters changed while the step was described")
            self._count_cautious_steps()
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

    # Note [mask schedule]: cautious_until=S keeps the cautious mask for a group's first S step()
    # calls; after the S-th the group's "cautious" is False (beyond the spec), and the next step's
    # plan sees the option change and describes the step anew. The mask's N/K scale grows the update
    # as fewer signs of u and g agree: it lets TD-CLM leave a loss plateau early, then costs ~3% of
    # held-out loss late (docs/benchmarks.md, rows T3m and T3o). The count is kept on the host in the
    # group ("cautious_steps", saved with the group in state_dict), so no step reads the device; it
    # counts calls that ran (a step skipped or refused on the device for a non-finite gradient too; a
    # call that raised, not). A CUDA graph replays the step it captured: recapture after the switch.
    def _count_cautious_steps(self) -> None:
        for group in self.param_groups:
            until = group["cautious_until"]  # every group has it (add_param_group, load_state_dict)
            if until is not None and group["cautious"]:
                group["cautious_steps"] = group.get("cautious_steps", 0) + 1  # absent in an older checkpoint
                self._end_mask_when_done(group)

    @staticmethod
    def _end_mask_when_done(group: dict) -> None:
        if group["cautious_steps"] >= group["cautious_until"]:
            group["cautious"] = False

    def _run_plans(self, plans: list[_Plan], grad_scale, found_inf) -> bool:
        """One native call per device; False when a description is stale."""
        self.last_native_calls = len(plans)
        for plan in plans:
            if not isinstance(plan.native, _native.StepPlan):  # backend="triton" (Note [device-resident Triton step])
                with torch.no_grad():
                    stepped = plan.native.step(grad_scale, found_inf, self.skip_nonfinite)
                if not stepped:
                    return False
                if plan.host_status is not None:
                    self._host_verdict(plan)
                continue
            stream = 0
            if plan.status is not None:
                stream = torch._C._cuda_getCurrentRawStream(plan.device.index)
            gs = grad_scale.data_ptr() if grad_scale is not None else 0
            fi = found_inf.data_ptr() if found_inf is not None else 0
            if plan.exchange is not None:
                code, message, position = self._run_phases(plan, stream, gs, fi)
            else:
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

    def _host_verdict(self, plan: _Plan) -> None:
        """A synchronous device's status word (the Triton interpreter): raise or count its verdict."""
        word = plan.host_status
        failed = int(word[1])
        if int(word[2]):
            self._host_skipped += int(word[2])
            word[2] = 0
        word[0] = 0
        if failed:
            word[1] = word[3] = 0
            name = plan.names[failed - 1] if 0 < failed <= len(plan.names) else "a parameter"
            raise NonFiniteGradientError(f"NaN or Inf in the gradient of {name}; parameters and optimizer "
                                         "state are unchanged", name)

    def _run_phases(self, plan: _Plan, stream: int, gs: int, fi: int):
        """A sharded plan's step: its phases around the all-reduces of the exchange (Note [sharded step])."""
        exchange = plan.exchange
        for phase in range(plan.exchanges + 1):
            result = plan.native.step_sharded(stream, gs, fi, self.skip_nonfinite, phase, exchange.data_ptr())
            if result[0] != _native.STATUS_OK or phase == plan.exchanges:
                return result  # an argument error or a rebuild comes from phase 0, before any collective
            if plan.group is not None:
                import torch.distributed as dist
                dist.all_reduce(exchange, op=dist.ReduceOp.SUM, group=plan.group)
        raise AssertionError("unreachable")

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
                shard = None
                if _is_dtensor(p):
                    if group["backend"] == "triton":
                        raise NotImplementedError("backend='triton' does not take sharded (DTensor) parameters yet; "
                                                  "use backend='auto' (the CUDA kernels) for FSDP2")
                    name = self._cached_name(group, pi)
                    # A replicated DTensor is a shard of one rank: a plan of its own, no exchange.
                    shard = _shard_of(p, name) or _Shard(0, p.numel(), None)
                key = (p.device, None if shard is None else ("sharded", shard.group))
                where = per_device.setdefault(key, {"groups": {}, "excluded": [], "shards": shard is not None})
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
                    # New states of a group and plan share one step counter (no device read to
                    # find that they are equal: _step_buckets).
                    state["step"] = fresh_steps.setdefault((id(group), key), state["step"])
                self._check_state(group, p, state, name)
                entry = _Entry(p, name, _local(p), grad, state, 0, shard)
                self._state_buffers(entry, state.get("master"))  # validates dtypes, sizes, devices
                if state["step"].device != p.device or state["step"].dtype != torch.float32:
                    state["step"] = state["step"].to(device=p.device, dtype=torch.float32)
                where["groups"].setdefault(id(group), (group, hp, []))[2].append((p, state, flat, name, shard))
        plans = []
        for (device, kind), where in per_device.items():
            plans.append(self._plan_for(device, where, kind))
        return plans

    def _plan_for(self, device: torch.device, where: dict, kind) -> _Plan:
        is_cuda = device.type == "cuda"
        status = None
        if is_cuda:
            index = device.index if device.index is not None else torch.cuda.current_device()
            # One status word and workspace per plan: a device may hold a plain and a sharded plan.
            status = self._devices.get((index, kind))
            if status is None:
                status = self._devices[(index, kind)] = _DeviceStatus(torch.device("cuda", index))
        backends = {group["backend"] for group, _, _ in where["groups"].values()}
        if len(backends) > 1:
            raise ValueError(f"param groups on {device} name different backends {sorted(backends)}; "
                             "one device takes one backend per step")
        backend = backends.pop() if backends else "auto"
        if backend == "triton":
            return self._triton_plan(device, where, status)
        if is_cuda and backend == "auto":
            backend = "cuda"
        device_type = _native.DEVICE_CPU
        if is_cuda:
            device_type = _native.DEVICE_ROCM if getattr(torch.version, "hip", None) else _native.DEVICE_CUDA
        # Plain tensors are read through DLPack's C table (Note [tensor reads through DLPack]).
        native = _native.StepPlan(backend, device_type, status.device.index if is_cuda else 0,
                                  torch.Tensor, torch.nn.Parameter)
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
                                              rows_of(_local(p).shape), factor)
                                             + (() if shard is None else
                                                (shard.index_offset, shard.logical_numel, rows_of(p.shape)))
                                             for p, state, flat, _, shard in bucket], step, lr_tensor, lr_dtype)
                names.extend(name for _, _, _, name, _ in bucket)
        native.add_excluded(where["excluded"])
        host_status = None
        if is_cuda:
            status.names = names
            workspace = status.workspace_of(native.workspace_bytes())
            native.set_async(status.status.data_ptr(), status.host.data_ptr(), workspace.data_ptr(),
                             workspace.numel())
        else:
            word = torch.zeros(4, dtype=torch.int32)
            workspace = torch.zeros(native.workspace_bytes() if native.sharded else 0, dtype=torch.uint8)
            native.set_async(word.data_ptr(), 0, workspace.data_ptr(), workspace.numel())
            host_status = word.numpy()  # keeps `word` alive
        plan = _Plan(native, device, names, status, host_status)
        if native.sharded:
            plan.group = kind[1]
            plan.exchanges = native.exchanges()
            plan.exchange = torch.zeros(native.exchange_doubles(), dtype=torch.float64, device=device)
            plan.workspace = workspace
            if plan.group is not None:
                self._check_collective_device(plan.group, device)
        return plan

    @staticmethod
    def _check_collective_device(group, device: torch.device) -> None:
        import torch.distributed as dist
        backend = str(dist.get_backend(group))
        if device.type == "cuda" and backend == "gloo" or device.type == "cpu" and backend == "nccl":
            raise ValueError(f"sharded parameters on {device} with a '{backend}' process group: the exchange "
                             "tensor lives on the parameters' device (NCCL for CUDA, gloo for CPU)")

    def _triton_plan(self, device: torch.device, where: dict, status: _DeviceStatus | None) -> _Plan:
        """backend="triton": the step through the Triton kernels (triton_step.py; imports triton)."""
        from . import triton_step
        groups, names = [], []
        for group, _, entries in where["groups"].values():
            options = triton_step.GroupOptions.of_group(group)
            for counter, bucket in self._step_buckets(entries):
                tensors = []
                for p, state, _, name, _ in bucket:
                    tensors.append(triton_step.TensorStep(p, state, name, len(names), seed=int(state["seed"])))
                    names.append(name)
                groups.append(triton_step.GroupStep(options, counter, tensors))
        host_status = None
        if status is not None:
            status.names = names
            word, host = status.status, status.host
        else:
            word, host = torch.zeros(4, dtype=torch.int32), None
            host_status = word.numpy()  # the interpreter runs synchronously: read after the step
        plan = triton_step.TritonStepPlan(device, groups, word, host, excluded=where["excluded"])
        return _Plan(plan, device, names, status, host_status)

    @staticmethod
    def _step_buckets(entries):
        """Entries grouped by step count, each group sharing one fp32 step counter tensor."""
        steps = [state["step"] for _, state, *_ in entries]
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
            for _, state, *_ in bucket:
                state["step"] = shared
            out.append((shared, bucket))
        return out

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


LuminaV.step.hooked = True  # Note [lean step wrapper]: torch's profile_hook_step would repeat it
