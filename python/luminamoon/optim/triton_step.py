"""``LuminaV(..., backend="triton")``: one device's step through the Triton kernels (triton_kernels.py).

A plan is built once per set of parameters (as the native StepPlan is) and
holds every launch's fixed arguments and scratch buffers; ``step()`` reads
only the gradients and launches, in stream order: the constants of each
group's step (``prepare_kernel``), round 0 of pass 1 for every tensor, round 1
where TD-CLM needs K or the norms, pass 2 for every tensor, the verdict and
the step counters (Note [device-resident Triton step]). Nothing waits for the
device, so a step can be captured in a CUDA graph; under TRITON_INTERPRET=1
the same launches run on CPU tensors (the CI tests).

Every launch and allocation happens with the tensors' device current
(``torch.accelerator``): Triton launches on the current device and stream.
"""
from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from . import triton_kernels as tk
from .functional import BOUND_MODES
from .triton_launch_cache import FOUND_INF, GRAD_SCALE, LaunchRecord
from .triton_step_graph import StepGraphs

# The launch geometry (Note [Triton block sizes] in triton_kernels.py, shared with the AOT build);
# LUMINAV_TRITON_APPLY_BLOCK / LUMINAV_TRITON_NUM_WARPS override it (tuning runs).
APPLY_BLOCK = int(os.environ.get("LUMINAV_TRITON_APPLY_BLOCK", tk.APPLY_BLOCK))
REDUCE_BLOCK = tk.REDUCE_BLOCK
FINALIZE_BLOCK = tk.FINALIZE_BLOCK
# Note [Triton factor tiles]: the row/factored sums' tile (LUMINAV_TRITON_FACTOR_LOAD_ROWS overrides the
# fp32 wide tile's rows per load, LUMINAV_TRITON_FACTOR_WARPS every tile's warps, and
# LUMINAV_TRITON_FACTOR_FORM_WARPS the factor kernels' warps: tuning runs).
FACTOR_LOAD_ROWS = {**tk.FACTOR_LOAD_ROWS, tk.FACTOR_WIDE_COLS: int(os.environ.get(
    "LUMINAV_TRITON_FACTOR_LOAD_ROWS", tk.FACTOR_LOAD_ROWS[tk.FACTOR_WIDE_COLS]))}
NUM_WARPS = int(os.environ.get("LUMINAV_TRITON_NUM_WARPS", tk.NUM_WARPS))  # apply and reduce (tuned together)
# Note [tensor tables]: CLM tensors of a group step two launches per dtype pair (finite check,
# apply) instead of two per tensor; LUMINAV_TRITON_MULTI_TENSOR=0 keeps one launch per tensor (A/B).
MULTI_TENSOR = os.environ.get("LUMINAV_TRITON_MULTI_TENSOR", "1") != "0"
# Note [replayed launches] (triton_launch_cache.py): a step whose launch arguments are those of the
# last recorded one (batched gradients are read from their tables, so their addresses may change)
# replays its launches; LUMINAV_TRITON_REPLAY=0 launches through the JIT every step (A/B).
REPLAY = os.environ.get("LUMINAV_TRITON_REPLAY", "1") != "0"
FACTOR_WARPS = {c: int(os.environ.get("LUMINAV_TRITON_FACTOR_WARPS", w))  # TD-CLM's sums, by tile columns
                for c, w in tk.FACTOR_WARPS.items()}
FACTOR_FORM_WARPS = int(os.environ.get("LUMINAV_TRITON_FACTOR_FORM_WARPS", tk.FACTOR_FORM_WARPS))
FACTOR_WARPS_ONE_ALIGNED = {c: int(os.environ.get("LUMINAV_TRITON_FACTOR_WARPS", w))
                            for c, w in tk.FACTOR_WARPS_ONE_ALIGNED.items()}
# Note [no contraction]: the nvcc kernels are built with -fmad=false and the host code with
# -ffp-contract=off, so a*b+c rounds twice everywhere; Triton would fuse it into an FMA and the
# fp32 values (hence the stochastic rounding bits) would differ from the other backends'.
FP_OPTIONS = {} if os.environ.get("TRITON_INTERPRET") == "1" else {"enable_fp_fusion": False}

_DTYPES = {torch.float32: tk.F32, torch.bfloat16: tk.BF16, torch.float16: tk.F16}


def device_context(device: torch.device):
    """The tensors' device made current for launches and allocations (a no-op on the CPU)."""
    if device.type == "cpu":
        return contextlib.nullcontext()
    index = device.index if device.index is not None else torch.accelerator.current_device_index()
    return torch.accelerator.device_index(index)


def _kernel_view(t: torch.Tensor) -> torch.Tensor:
    """16-bit data as int16 (the kernels convert bits); fp32 as is."""
    return t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t


@dataclass
class GroupOptions:
    """A param group's hyperparameters as the kernels take them."""

    lr: Any                # float, or a 1-element float32/float64 tensor on the device
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    tau: float
    lam: float
    tdclm: bool
    td_factor: str         # "factored", "row", "tensor"
    cautious: bool
    bound_mode: int        # 0 none, 1 tensor, 2 element (LuminaV refuses 3, rms, with this backend)
    bound_ratio: float
    check_finite: bool
    stochastic_rounding: bool
    group: dict | None = field(default=None, repr=False, compare=False)  # the param group (of_group)

    @classmethod
    def of_group(cls, group: dict) -> "GroupOptions":
        """The options of a LuminaV param group (validated by the library when the group was added)."""
        beta1, beta2 = group["betas"]
        bound = BOUND_MODES[group["bound"]]
        lr = group["lr"]
        return cls(lr=lr if torch.is_tensor(lr) else float(lr), beta1=float(beta1), beta2=float(beta2),
                   eps=float(group["eps"]), weight_decay=float(group["weight_decay"]), tau=float(group["tau"]),
                   lam=float(group["lam"]), tdclm=group["mode"] == "tdclm", td_factor=group["td_factor"],
                   cautious=bool(group["cautious"]), bound_mode=bound,
                   bound_ratio=float(group["bound_ratio"] or 0.0), check_finite=bool(group["check_finite"]),
                   stochastic_rounding=bool(group["stochastic_rounding"]), group=group)

    def fp32_args(self) -> dict:
        """fp32 constants (Note [derived constants]: 1 - beta and 1 - lam formed in double)."""
        return dict(beta1=self.beta1, one_minus_beta1=1.0 - self.beta1, beta2=self.beta2,
                    one_minus_beta2=1.0 - self.beta2, eps=self.eps, lam=self.lam, one_minus_lam=1.0 - self.lam,
                    tau=self.tau)

    def needs_update_sums(self) -> bool:
        return self.cautious or self.bound_mode == 1


@dataclass
class TensorStep:
    """One parameter of a plan, with its scratch."""

    param: torch.Tensor
    state: dict
    name: str
    position: int          # in the whole call (the verdict's tensor position)
    seed: int = 0          # the stochastic rounding seed (state["seed"])
    index_offset: int = 0  # of a shard in its logical tensor
    kind: int = 0
    batch_gdtype: int | None = None  # in a TensorBatch: the gradient dtype its kernel takes
    rows: int = 1
    cols: int = 1
    scratch: dict = field(default_factory=dict)


@dataclass
class TensorBatch:
    """Tensors of one group and dtype pair stepped by the multi-tensor kernels: CLM's (kind ELEMENT,
    Note [tensor tables] in triton_kernels.py) or TD-CLM's factored ones of one tile (kind FACTORED,
    Note [factored tables]). The program maps and tensor tables (sizes and the addresses of
    parameters, state and scratch) are built with the plan; the gradient table is written when a
    gradient's address changed (a new gradient tensor after zero_grad(set_to_none=True), say)."""

    tensors: list[TensorStep]
    pdtype: int
    gdtype: int
    master: bool
    kind: int = tk.ELEMENT
    tile: tuple | None = None  # FACTORED: the sums' (rows per load, columns) of every tensor
    maps: dict = field(default_factory=dict)  # FACTORED: stage -> its program map (device)
    flat: list[int] = field(default_factory=list)  # the tensors' positions among the plan's gradients
    reduce_map: torch.Tensor = None
    apply_map: torch.Tensor = None
    tables: dict = field(default_factory=dict)  # block -> the tensor table (device)
    fixed_aligned: bool = False  # every N and parameter/state address a multiple of 16
    grad_table: torch.Tensor = None  # device int64 per tensor: the gradients' addresses
    grad_addresses: list | None = None  # what grad_table holds (None: not written yet)
    grad_host: torch.Tensor | None = None  # its last upload's pinned source (a captured copy reads it)
    grads_aligned: bool = False

    def aligned(self) -> bool:
        """The kernels' ALIGNED: every address and N of the batch a multiple of 16 (vectorized access)."""
        return self.fixed_aligned and self.grads_aligned


# A param group's options that a plan fixes (its launches take them as arguments): a plan whose
# group holds another object under one of these keys is stale and described anew, as the native
# plan is on its fixed keys. lr is read on every step (a scheduler writes it).
FIXED_OPTIONS = ("betas", "eps", "weight_decay", "tau", "lam", "mode", "td_factor", "cautious", "bound",
                 "bound_ratio", "check_finite", "stochastic_rounding", "master_weights", "backend")


def _fixed_options(group: dict) -> list:
    return [group.get(k) for k in FIXED_OPTIONS]


@dataclass
class GroupStep:
    options: GroupOptions
    counter: torch.Tensor  # the group's fp32 step counter (state["step"], shared)
    tensors: list[TensorStep]
    fixed: list | None = None  # _fixed_options of the group when the plan was built
    hp64: torch.Tensor = None
    k: torch.Tensor = None
    step: torch.Tensor = None
    lr_cached: float | None = None
    batches: list[TensorBatch] = field(default_factory=list)


def second_moment_kind(options: GroupOptions, param: torch.Tensor) -> tuple[int, int, int]:
    """(kind, R, C) of core::moment_layout: CLM and per-element TD-CLM are ELEMENT."""
    rows = int(param.shape[0]) if param.dim() else 1
    cols = param.numel() // rows if rows else 0
    if not options.tdclm:
        return tk.ELEMENT, rows, cols
    if options.td_factor == "tensor":
        return tk.TENSOR, rows, cols
    if cols == 1:
        return tk.ELEMENT, rows, cols
    return (tk.ROW if options.td_factor == "row" else tk.FACTORED), rows, cols


class TritonStepPlan:
    """The Triton step of one device's parameters (Note [device-resident Triton step])."""

    def __init__(self, device: torch.device, groups: list[GroupStep], status: torch.Tensor,
                 host_status: torch.Tensor | None = None, excluded: list | None = None):
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("backend='triton' runs on a GPU (CUDA, ROCm, XPU); on the CPU only under "
                             "TRITON_INTERPRET=1 (slow: for tests). Use backend='auto' for CPU parameters")
        self.device = device
        self.excluded = list(excluded or ())  # parameters without a gradient when the plan was built
        self.groups = groups
        self.status = status
        self.host_status = host_status
        with device_context(device):
            self.words = torch.zeros(2, dtype=torch.int32, device=device)
            for g in groups:
                o = g.options
                lr = float(o.lr) if not torch.is_tensor(o.lr) else 0.0
                g.hp64 = self._upload(torch.tensor([o.beta1, o.beta2, o.weight_decay, lr], dtype=torch.float64))
                g.lr_cached = lr
                g.fixed = _fixed_options(o.group) if o.group is not None else None
                g.k = torch.zeros(8, dtype=torch.float32, device=device)
                g.step = torch.zeros(1, dtype=torch.int64, device=device)
                for t in g.tensors:
                    self._allocate(o, t)
                if MULTI_TENSOR:
                    g.batches = self._batches(g)
        self._in_batch = {id(t) for g in groups for b in g.batches for t in b.tensors}
        self._params = [t.param for g in groups for t in g.tensors]
        self._param_addresses = [p.data_ptr() for p in self._params]  # a change makes the plan stale
        flat = {id(t): i for i, t in enumerate(t for g in groups for t in g.tensors)}
        self._all_batches = [b for g in groups for b in g.batches]
        for b in self._all_batches:
            b.flat = [flat[id(t)] for t in b.tensors]
        # The gradients launched as kernel arguments (not through a gradient table): slots a replay
        # fills with this step's addresses (Note [replayed launches]); the empty ones are never launched.
        self._alone = [flat[id(t)] for g in groups for t in g.tensors
                       if id(t) not in self._in_batch and t.param.numel() > 0]
        self._alone_addresses: list[int] = []  # theirs at the last _replay_key
        self._grad_addresses: list | None = None  # every gradient's address at the last step
        # Interpreted kernels (the CPU) have no compiled kernel to replay.
        self._replayable = REPLAY and device.type != "cpu"
        self._record: LaunchRecord | None = None  # the last step's launches (Note [replayed launches])
        self.graphs = StepGraphs(device)  # that record as CUDA graphs (Note [Triton step graphs])
        self._recording: LaunchRecord | None = None
        self._slots: dict = {}
        self._address_slots: dict = {}

    # ---- many tensors per launch (Note [tensor tables]) ---------------------------------------

    def _batches(self, g: GroupStep) -> list[TensorBatch]:
        """The group's CLM tensors that need no per-tensor globals (no cautious mask, no tensor
        bound), by (param dtype, gradient dtype, master); a single tensor keeps its own launches."""
        if g.options.needs_update_sums():
            return []
        by_key: dict[tuple, list[TensorStep]] = {}
        factored: dict[tuple, list[TensorStep]] = {}
        for t in g.tensors:
            if t.param.numel() == 0 or t.param.grad is None:
                continue
            key = (_DTYPES[t.param.dtype], _DTYPES[t.param.grad.dtype], t.state.get("master") is not None)
            if t.kind == tk.ELEMENT:
                by_key.setdefault(key, []).append(t)
            elif t.kind == tk.FACTORED:
                factored.setdefault(key + (t.scratch["tile"],), []).append(t)
        batches = ([self._factored_batch(g, tensors, *key) for key, tensors in factored.items() if len(tensors) >= 2]
                   + [self._element_batch(tensors, *key) for key, tensors in by_key.items() if len(tensors) >= 2])
        for b in batches:
            b.grad_table = torch.zeros(len(b.tensors), dtype=torch.int64, device=self.device)
            for t in b.tensors:
                t.batch_gdtype = b.gdtype
        return batches

    def _element_batch(self, tensors: list[TensorStep], pdtype: int, gdtype: int, master: bool) -> TensorBatch:
        """CLM tensors of one dtype pair (Note [tensor tables]): a table and a program map per block size."""
        b = TensorBatch(tensors, pdtype, gdtype, master)
        b.reduce_map = self._program_map([triton_cdiv(t.param.numel(), REDUCE_BLOCK) for t in tensors])
        b.apply_map = self._program_map([triton_cdiv(t.param.numel(), APPLY_BLOCK) for t in tensors])
        fixed = [_fixed_addresses(t) for t in tensors]
        # (16-bit batches too: the AOT bf16 _a16 fault of session 2 was the manifest's shared
        # memory, Note [shared memory per platform]; the JIT sizes its own launches.)
        b.fixed_aligned = (all(t.param.numel() % 16 == 0 for t in tensors)
                           and all(a % 16 == 0 for ptrs in fixed for a in ptrs))
        for block in (REDUCE_BLOCK, APPLY_BLOCK):
            rows, first = [], 0
            for t, ptrs in zip(tensors, fixed):
                n = t.param.numel()
                rows.append([first, n, *ptrs, _int64_bits(t.seed), t.index_offset, t.position])
                first += triton_cdiv(n, block)
            b.tables[block] = self._upload(torch.tensor(rows, dtype=torch.int64))
        return b

    def _factored_batch(self, g: GroupStep, tensors: list[TensorStep], pdtype: int, gdtype: int, master: bool,
                        tile: tuple) -> TensorBatch:
        """Factored TD-CLM tensors of one dtype pair and sums tile (Note [factored tables]): their table
        rows and each stage's program map, as many programs per tensor as its own launches have."""
        b = TensorBatch(tensors, pdtype, gdtype, master, kind=tk.FACTORED, tile=tile)
        counts = {tk.FT_SUMS_FIRST: [t.scratch["chunks"] * t.scratch["strips"] for t in tensors],
                  tk.FT_ROWS_FIRST: [t.scratch["row_blocks"] for t in tensors],
                  tk.FT_COLS_FIRST: [triton_cdiv(t.cols, tk.FACTOR_COL_BLOCK) for t in tensors],
                  tk.FT_APPLY_FIRST: [triton_cdiv(t.param.numel(), APPLY_BLOCK) for t in tensors]}
        firsts = {stage: list(itertools.accumulate(c, initial=0)) for stage, c in counts.items()}
        table = []
        for i, t in enumerate(tensors):
            s = t.scratch
            param, exp_avg, exp_avg_sq, master_or_param = _fixed_addresses(t)
            fields = {tk.FT_ROWS: t.rows, tk.FT_COLS: t.cols,
                      tk.FT_POSITION: t.position if g.options.check_finite else tk.NO_BAD,
                      tk.FT_ROW_PART: s["row_part"].data_ptr(), tk.FT_COL_PART: s["col_part"].data_ptr(),
                      tk.FT_BLOCK_SUMS: s["block_sums"].data_ptr(), tk.FT_NEW: s["new"].data_ptr(),
                      tk.FT_GL: s["gl"].data_ptr(), tk.FT_PARAM: param, tk.FT_EXP_AVG: exp_avg,
                      tk.FT_EXP_AVG_SQ: exp_avg_sq, tk.FT_MASTER: master_or_param, tk.FT_SEED: _int64_bits(t.seed),
                      tk.FT_INDEX_OFFSET: t.index_offset, tk.FT_STRIPS: s["strips"], tk.FT_CHUNKS: s["chunks"],
                      tk.FT_ROW_BLOCKS: s["row_blocks"], tk.FT_APPLY_PROGRAMS: counts[tk.FT_APPLY_FIRST][i],
                      **{stage: firsts[stage][i] for stage in counts}}
            row = [0] * tk.FACTORED_FIELDS.value
            for f, value in fields.items():
                row[f.value] = value
            table.append(row)
        b.tables["factored"] = self._upload(torch.tensor(table, dtype=torch.int64))
        b.maps = {stage.value: self._program_map(c) for stage, c in counts.items()}
        b.fixed_aligned = (all(t.cols % 16 == 0 and t.param.numel() % 16 == 0 for t in tensors)
                           and all(a % 16 == 0 for t in tensors for a in _fixed_addresses(t)))
        return b

    def _program_map(self, counts: list[int]) -> torch.Tensor:
        """The tensor of each program (int32), tensor i owning counts[i] programs in a row."""
        return self._upload(torch.repeat_interleave(torch.arange(len(counts), dtype=torch.int32),
                                                    torch.tensor(counts, dtype=torch.int64)))

    def _upload(self, host: torch.Tensor) -> torch.Tensor:
        """A host tensor on the plan's device without waiting for it: pinned and non-blocking (a
        pageable copy waits for the queued GPU work; the first GPU run of the tables did, 102 ms
        behind a sleep). The caching host allocator keeps the pinned memory until the copy has run."""
        if self.device.type == "cpu":
            return host
        return host.pin_memory().to(self.device, non_blocking=True)

    def _point_batches_at(self, addresses: list[int]) -> None:
        """Every batch's gradient table holding the gradients at `addresses` (all the plan's, in its
        order): written, pinned and non-blocking, only where one changed. The last upload's pinned
        source is kept (not handed back to the caching host allocator) while the table holds it: a
        step captured in a CUDA graph replays that copy from it."""
        if addresses == self._grad_addresses:
            return
        for b in self._all_batches:
            mine = [addresses[i] for i in b.flat]
            if mine == b.grad_addresses:
                continue
            host = torch.empty(len(mine), dtype=torch.int64, pin_memory=self.device.type != "cpu")
            host.numpy()[:] = mine
            b.grad_table.copy_(host, non_blocking=True)
            b.grad_host, b.grad_addresses = host, mine
            b.grads_aligned = all(a % 16 == 0 for a in mine)
        self._grad_addresses = addresses

    def _allocate(self, o: GroupOptions, t: TensorStep) -> None:
        t.kind, t.rows, t.cols = second_moment_kind(o, t.param)
        n = t.param.numel()
        f64 = dict(dtype=torch.float64, device=self.device)
        programs = max(triton_cdiv(n, REDUCE_BLOCK), 1)
        s = t.scratch
        if t.kind in (tk.ROW, tk.FACTORED):  # Note [Triton factor tiles]
            wide = tk.FACTOR_WIDE_COLS_2B if t.param.element_size() == 2 else tk.FACTOR_WIDE_COLS
            block_c = wide if t.cols >= tk.FACTOR_WIDE_FROM else tk.FACTOR_NARROW_COLS
            strips = triton_cdiv(t.cols, block_c)
            chunks = triton_cdiv(t.rows, tk.FACTOR_CHUNK_ROWS)
            s["tile"] = (FACTOR_LOAD_ROWS[block_c], block_c)
            s["strips"], s["chunks"] = strips, chunks
            s["row_part"] = torch.zeros(strips * t.rows, **f64)
            s["col_part"] = torch.zeros(chunks * t.cols if t.kind == tk.FACTORED else 1, **f64)
            s["row_blocks"] = triton_cdiv(t.rows, tk.FACTOR_ROW_BLOCK)
            s["block_sums"] = torch.zeros(s["row_blocks"], **f64)
        s["partials"] = torch.zeros(programs * tk.PARTIAL_FIELDS, **f64)
        s["gl"] = torch.zeros(4, dtype=torch.float32, device=self.device)
        factor_floats = t.rows + 2 * t.cols if t.kind == tk.FACTORED else t.rows if t.kind == tk.ROW else 1
        s["new"] = torch.zeros(factor_floats, dtype=torch.float32, device=self.device)

    # ---- the step -----------------------------------------------------------------------------

    def grads(self) -> list[torch.Tensor] | None:
        """Every parameter's gradient (contiguous), or None when the plan is stale."""
        if any(p.grad is not None for p in self.excluded):
            return None
        out = []
        for g in self.groups:
            for t in g.tensors:
                grad = t.param.grad
                if grad is None or grad.shape != t.param.shape or grad.dtype not in _DTYPES:
                    return None
                if t.batch_gdtype is not None and _DTYPES[grad.dtype] != t.batch_gdtype:
                    return None  # the batch's kernel was chosen for another gradient dtype
                out.append(grad if grad.is_contiguous() else grad.contiguous())
        return out

    def step(self, grad_scale: torch.Tensor | None, found_inf: torch.Tensor | None, skip_nonfinite: bool) -> bool:
        """Launches one step; False (nothing launched) when the plan is stale.

        A step whose launches take the arguments of the last recorded step replays that step's
        launches: the gradients of tensors launched on their own at the same addresses (contiguous,
        as the plan checked them then; torch keeps a gradient's shape and dtype those of its
        parameter), the batches' gradient tables written where an address changed (Note [tensor
        tables]). No Python per tensor then beyond reading the addresses."""
        if (any(p.grad is not None for p in self.excluded) or not self._options_unchanged()
                or [p.data_ptr() for p in self._params] != self._param_addresses):
            return False  # a parameter left out now has a gradient, a group option or a storage changed
        key = self._replay_key(grad_scale, found_inf, skip_nonfinite)
        record = self._record
        if key is not None and record is not None and record.key == key:
            with device_context(self.device):
                self._refresh_lr()
                fills = {GRAD_SCALE: grad_scale.data_ptr() if grad_scale is not None else 0,
                         FOUND_INF: found_inf.data_ptr() if found_inf is not None else 0}
                fills.update(enumerate(self._alone_addresses))  # slot k: the k-th such gradient
                self.graphs.run(fills, lambda stream: record.replay(stream, fills),
                                lambda: _current_stream(self.device))
                self._copy_status()
            return True
        self._record = None
        self.graphs.clear()
        grads = self.grads()
        if grads is None:
            return False
        with device_context(self.device):
            self._recording = LaunchRecord(key) if key is not None else None
            self._slots = {id(v): name for name, v in ((GRAD_SCALE, grad_scale), (FOUND_INF, found_inf))
                           if v is not None}
            self._address_slots = {a: k for k, a in enumerate(self._alone_addresses)} if key is not None else {}
            try:
                self._launch(grads, grad_scale, found_inf, skip_nonfinite)
            finally:
                recording, self._recording = self._recording, None
            self._record = recording if recording is not None and recording.complete else None
        return True

    def _replay_key(self, grad_scale, found_inf, skip_nonfinite) -> tuple | None:
        """What a recorded step depends on beyond the plan: whether each gradient launched on its own
        is 16-byte aligned (the JIT specializes a pointer on it; the address itself is a slot) and each
        batch's are ALIGNED, and the step's flags (None when a gradient is missing or not contiguous:
        such a step is never recorded). Points the batches' gradient tables at this step's gradients
        (device-side, in stream order: the step's launches follow)."""
        if not self._replayable:
            return None
        grads = [p.grad for p in self._params]
        try:
            if not all([g.is_contiguous() for g in grads]):
                return None
            addresses = [g.data_ptr() for g in grads]
        except AttributeError:  # a gradient is None
            return None
        with device_context(self.device):
            self._point_batches_at(addresses)
        self._alone_addresses = [addresses[i] for i in self._alone]
        return (tuple([a % 16 == 0 for a in self._alone_addresses]), tuple([b.aligned() for b in self._all_batches]),
                grad_scale is not None, found_inf is not None, bool(skip_nonfinite))

    def _run(self, kernel, grid: tuple, *args, **kwargs) -> None:
        """One launch through the JIT, recorded when this step is (Note [replayed launches])."""
        if self._recording is None:
            kernel[grid](*args, **kwargs)
        else:
            self._recording.launch(kernel, grid, args, kwargs, self._slots, self._address_slots)

    def _options_unchanged(self) -> bool:
        """Every group holds the option objects the plan was built with (FIXED_OPTIONS), and an lr of
        the same kind (the same tensor, when it is one: the kernels read it in place)."""
        for g in self.groups:
            group = g.options.group
            if group is None:
                continue
            if any(a is not b for a, b in zip(_fixed_options(group), g.fixed)):
                return False
            lr, was = group["lr"], g.options.lr
            if torch.is_tensor(lr) or torch.is_tensor(was):
                if lr is not was:
                    return False
        return True

    def _refresh_lr(self) -> None:
        """A float lr's value now (an LR scheduler writes the group's): one device fill when it changed."""
        for g in self.groups:
            o = g.options
            lr = o.group["lr"] if o.group is not None else o.lr
            if not torch.is_tensor(lr) and float(lr) != g.lr_cached:
                g.lr_cached = float(lr)
                g.hp64[3].fill_(g.lr_cached)

    def _copy_status(self) -> None:
        if self.host_status is not None:
            self.host_status.copy_(self.status, non_blocking=True)

    def _launch(self, grads, grad_scale, found_inf, skip_nonfinite) -> None:
        status, words = self.status, self.words
        dummy = words  # an unused pointer argument
        self._refresh_lr()  # a scheduler's new float lr: one device fill, no sync
        scaled = grad_scale is not None
        for gi, g in enumerate(self.groups):
            o = g.options
            lr_mode = 0
            lr_ptr = dummy
            if torch.is_tensor(o.lr):
                lr_mode, lr_ptr = (2 if o.lr.dtype == torch.float64 else 1), o.lr
            self._run(tk.prepare_kernel, (1,), g.k, g.step, g.hp64, g.counter, lr_ptr,
                      grad_scale if scaled else dummy, found_inf if found_inf is not None else dummy, status, words,
                      LR=lr_mode, SCALED=scaled, FOUND_INF=found_inf is not None, RESET=gi == 0, **FP_OPTIONS)
        per_tensor = []
        it = iter(grads)
        for g in self.groups:
            for t in g.tensors:
                per_tensor.append((g, t, next(it)))
        work = [(g, t, grad) for g, t, grad in per_tensor if t.param.numel() > 0]
        alone = [(g, t, grad) for g, t, grad in work if id(t) not in self._in_batch]
        # (the gradients launched: contiguous copies of the ones that are not)
        self._point_batches_at([grad.data_ptr() for _, _, grad in per_tensor])
        for g, t, grad in alone:
            self._round(g, t, grad, 0, scaled)
        for g in self.groups:  # every verdict before any pass 2: a non-finite gradient writes nothing
            for b in g.batches:
                if b.kind == tk.FACTORED:
                    self._factored_round0_batch(g, b, scaled)
                elif g.options.check_finite:
                    self._finite_check_batch(g, b, scaled)
        for g, t, grad in alone:
            if t.kind != tk.ELEMENT and g.options.needs_update_sums():
                self._round(g, t, grad, 1, scaled)
        for g, t, grad in alone:
            self._apply(g, t, grad, scaled)
        for g in self.groups:
            for b in g.batches:
                (self._factored_apply_batch if b.kind == tk.FACTORED else self._apply_batch)(g, b, scaled)
        self._run(tk.commit_kernel, (1,), status, words, found_inf if found_inf is not None else dummy,
                  FOUND_INF=found_inf is not None, SKIP_NONFINITE=bool(skip_nonfinite), **FP_OPTIONS)
        for g in self.groups:
            self._run(tk.advance_kernel, (1,), status, g.counter, **FP_OPTIONS)
        self._copy_status()

    def _x_of(self, t: TensorStep):
        master = t.state.get("master")
        if master is not None:
            return master, tk.F32
        return _kernel_view(t.param.data), _DTYPES[t.param.dtype]

    def _round(self, g: GroupStep, t: TensorStep, grad: torch.Tensor, rnd: int, scaled: bool) -> None:
        """Pass 1's round `rnd` of one tensor and its finalize (core::reduction_rounds)."""
        o = g.options
        s = t.scratch
        n = t.param.numel()
        element = t.kind == tk.ELEMENT
        grad_round = rnd == 0
        update_round = o.needs_update_sums() and (rnd == 1 or element)
        if element and not update_round and not o.check_finite:
            return  # nothing to reduce; pass 2 reads no globals
        # A CLM tensor with only the finite check: the reduce programs mark the step (VERDICT).
        verdict_only = element and not update_round
        gk = _kernel_view(grad)
        gdtype = _DTYPES[grad.dtype]
        exp_avg_sq = t.state["exp_avg_sq"]
        num_partials = triton_cdiv(n, REDUCE_BLOCK)
        if grad_round and t.kind in (tk.ROW, tk.FACTORED):
            self._factors(g, t, gk, gdtype, scaled)
            return
        x, xdtype = self._x_of(t)
        new = s["new"]
        self._run(tk.reduce_kernel, (num_partials,),
            gk, t.state["exp_avg"], exp_avg_sq, x, s["partials"], g.k, self.words, s["gl"], new,
            new[t.rows + t.cols:] if t.kind == tk.FACTORED else new, n, t.cols, t.position, **o.fp32_args(),
            GDTYPE=gdtype, XDTYPE=xdtype, GRAD_SUMS=grad_round and (o.check_finite or t.kind == tk.TENSOR),
            UPDATE_SUMS=update_round, KIND=t.kind, HAS_LAM=o.lam != 0.0, HAS_TAU=o.tau > 0.0,
            SCALED=scaled, VERDICT=verdict_only, BLOCK=REDUCE_BLOCK, num_warps=NUM_WARPS, **FP_OPTIONS)
        if verdict_only:
            return
        new = s["new"]  # (the finalize's factor arguments are no longer read: Note [Triton factor tiles])
        self._run(tk.finalize_kernel, (1,),
            s["partials"], num_partials, s["gl"], self.words, g.k, exp_avg_sq, new, new, new, n, t.rows, t.cols, 1,
            t.position, o.beta2, 1.0 - o.beta2, o.bound_ratio, ROUND_GRAD=grad_round, ROUND_UPDATE=update_round,
            CHECK_FINITE=grad_round and o.check_finite, KIND=t.kind if grad_round else tk.ELEMENT, CAUTIOUS=o.cautious,
            BOUND_TENSOR=o.bound_mode == 1, BLOCK=FINALIZE_BLOCK, **FP_OPTIONS)

    def _factors(self, g: GroupStep, t: TensorStep, gk: torch.Tensor, gdtype: int, scaled: bool) -> None:
        """Round 0 of a row/factored tensor (Note [Triton factor tiles]): its gradient read once for the
        row and column partials and the finite verdict, then the new factors and rho over many programs."""
        o = g.options
        s = t.scratch
        exp_avg_sq = t.state["exp_avg_sq"]
        load_rows, block_c = s["tile"]
        factored = t.kind == tk.FACTORED
        aligned = gk.data_ptr() % 16 == 0 and t.rows % 16 == 0 and t.cols % 16 == 0
        warps = (FACTOR_WARPS_ONE_ALIGNED if aligned else FACTOR_WARPS)[block_c]
        self._run(tk.factor_sums_kernel, (s["chunks"] * s["strips"],),
            gk, s["row_part"], s["col_part"], g.k, self.words, t.rows, t.cols,
            t.position if o.check_finite else tk.NO_BAD, int(factored), GDTYPE=gdtype, SCALED=scaled,
            CHUNK_ROWS=tk.FACTOR_CHUNK_ROWS, LOAD_ROWS=load_rows, BLOCK_C=block_c, num_warps=warps, **FP_OPTIONS)
        self._run(tk.factor_rows_kernel, (s["row_blocks"],),
            s["row_part"], exp_avg_sq, s["new"], s["block_sums"], self.words, t.rows, t.cols, s["strips"], o.beta2,
            1.0 - o.beta2, BLOCK=tk.FACTOR_ROW_BLOCK, MERGE=tk.FACTOR_MERGE, num_warps=FACTOR_FORM_WARPS, **FP_OPTIONS)
        self._run(tk.factor_cols_kernel, (triton_cdiv(t.cols, tk.FACTOR_COL_BLOCK) if factored else 1,),
            s["col_part"], s["block_sums"], exp_avg_sq, s["new"], s["gl"], self.words, t.rows, t.cols,
            t.cols if factored else 0, s["chunks"] if factored else 0, s["row_blocks"], o.beta2, 1.0 - o.beta2,
            BLOCK=tk.FACTOR_COL_BLOCK, MERGE=tk.FACTOR_MERGE, num_warps=FACTOR_FORM_WARPS, **FP_OPTIONS)

    def _apply(self, g: GroupStep, t: TensorStep, grad: torch.Tensor, scaled: bool) -> None:
        o = g.options
        s = t.scratch
        n = t.param.numel()
        master = t.state.get("master")
        p = _kernel_view(t.param.data)
        self._run(tk.apply_kernel, (triton_cdiv(n, APPLY_BLOCK),),
            p, _kernel_view(grad), t.state["exp_avg"], t.state["exp_avg_sq"], master if master is not None else p,
            g.k, g.step, self.words, s["gl"], s["new"], n, t.rows, t.cols, t.seed, t.index_offset, **o.fp32_args(), bound_ratio=o.bound_ratio,
            PDTYPE=_DTYPES[t.param.dtype], GDTYPE=_DTYPES[grad.dtype], KIND=t.kind, MASTER=master is not None,
            SR=o.stochastic_rounding and t.param.dtype != torch.float32, HAS_LAM=o.lam != 0.0, HAS_TAU=o.tau > 0.0,
            CAUTIOUS=o.cautious, BOUND=o.bound_mode, SCALED=scaled, BLOCK=APPLY_BLOCK, num_warps=NUM_WARPS, **FP_OPTIONS)


    def _finite_check_batch(self, g: GroupStep, b: TensorBatch, scaled: bool) -> None:
        self._run(tk.finite_check_multi_kernel, (b.reduce_map.numel(),),
            b.tables[REDUCE_BLOCK], b.grad_table, b.reduce_map, g.k, self.words, GDTYPE=b.gdtype, SCALED=scaled,
            ALIGNED=b.aligned(), BLOCK=REDUCE_BLOCK, num_warps=NUM_WARPS, **FP_OPTIONS)

    def _factored_round0_batch(self, g: GroupStep, b: TensorBatch, scaled: bool) -> None:
        """_factors for every tensor of a factored batch: three launches (Note [factored tables])."""
        o = g.options
        table, maps = b.tables["factored"], b.maps
        load_rows, block_c = b.tile
        self._run(tk.factored_sums_multi_kernel, (maps[tk.FT_SUMS_FIRST.value].numel(),),
            table, b.grad_table, maps[tk.FT_SUMS_FIRST.value], g.k, self.words, GDTYPE=b.gdtype, SCALED=scaled,
            CHUNK_ROWS=tk.FACTOR_CHUNK_ROWS, LOAD_ROWS=load_rows, BLOCK_C=block_c, ALIGNED=b.aligned(),
            num_warps=FACTOR_WARPS[block_c], **FP_OPTIONS)
        self._run(tk.factored_rows_multi_kernel, (maps[tk.FT_ROWS_FIRST.value].numel(),),
            table, maps[tk.FT_ROWS_FIRST.value], self.words, o.beta2, 1.0 - o.beta2, BLOCK=tk.FACTOR_ROW_BLOCK,
            MERGE=tk.FACTOR_MERGE, num_warps=FACTOR_FORM_WARPS, **FP_OPTIONS)
        self._run(tk.factored_cols_multi_kernel, (maps[tk.FT_COLS_FIRST.value].numel(),),
            table, maps[tk.FT_COLS_FIRST.value], self.words, o.beta2, 1.0 - o.beta2, BLOCK=tk.FACTOR_COL_BLOCK,
            MERGE=tk.FACTOR_MERGE, num_warps=FACTOR_FORM_WARPS, **FP_OPTIONS)

    def _factored_apply_batch(self, g: GroupStep, b: TensorBatch, scaled: bool) -> None:
        o = g.options
        apply_map = b.maps[tk.FT_APPLY_FIRST.value]
        self._run(tk.factored_apply_multi_kernel, (apply_map.numel(),),
            b.tables["factored"], b.grad_table, apply_map, g.k, g.step, self.words, **o.fp32_args(),
            bound_ratio=o.bound_ratio, PDTYPE=b.pdtype, GDTYPE=b.gdtype, MASTER=b.master,
            SR=o.stochastic_rounding and b.pdtype != tk.F32, HAS_LAM=o.lam != 0.0, HAS_TAU=o.tau > 0.0,
            BOUND=o.bound_mode, SCALED=scaled, ALIGNED=b.aligned(), BLOCK=APPLY_BLOCK, num_warps=NUM_WARPS,
            **FP_OPTIONS)

    def _apply_batch(self, g: GroupStep, b: TensorBatch, scaled: bool) -> None:
        o = g.options
        self._run(tk.apply_multi_kernel, (b.apply_map.numel(),),
            b.tables[APPLY_BLOCK], b.grad_table, b.apply_map, g.k, g.step, self.words, **o.fp32_args(),
            bound_ratio=o.bound_ratio, PDTYPE=b.pdtype, GDTYPE=b.gdtype, MASTER=b.master,
            SR=o.stochastic_rounding and b.pdtype != tk.F32, HAS_LAM=o.lam != 0.0, HAS_TAU=o.tau > 0.0,
            BOUND=o.bound_mode, SCALED=scaled, ALIGNED=b.aligned(), BLOCK=APPLY_BLOCK, num_warps=NUM_WARPS,
            **FP_OPTIONS)


def _int64_bits(seed: int) -> int:
    """A uint64 rounding seed's bits as the int64 a table holds."""
    return seed - (1 << 64) if seed >= (1 << 63) else seed


def _fixed_addresses(t: TensorStep) -> tuple[int, ...]:
    """A tensor table row's addresses: param, exp_avg, exp_avg_sq, master (the param without one)."""
    master = t.state.get("master")
    return (t.param.data_ptr(), t.state["exp_avg"].data_ptr(), t.state["exp_avg_sq"].data_ptr(),
            (master if master is not None else t.param).data_ptr())


def _current_stream(device: torch.device) -> int:
    """The raw handle of the device's current stream (the one a JIT launch would take)."""
    from triton.runtime import driver
    return driver.active.get_current_stream(device.index if device.index is not None
                                            else driver.active.get_current_device())


def triton_cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))
