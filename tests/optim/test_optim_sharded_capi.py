"""luminav_step_groups_sharded (include/luminav/luminav_groups.h) through ctypes, in one process:
shards of one logical tensor stepped phase by phase, the test adding their exchange buffers as an
all-reduce would. Against the float64 spec reference, and every error row of the phases."""
from __future__ import annotations

import ctypes as C
import dataclasses

import numpy as np
import pytest

from luminav_ctypes import Hyperparams, Options, Tensor, as_hyper, hyperparams, load_library
from luminav_reference import accuracy_factor, assert_within_forward_error, reference_step
from test_optim_step_groups import Async, Group, StepStatus

F32, TD_FACTORED = 0, 0
INVALID, NONFINITE = 1, 2
ROWS, COLS = 9, 11


class ShardLayout(C.Structure):
    _fields_ = [("logical_num_elements", C.c_uint64), ("logical_rows", C.c_uint64)]


@pytest.fixture(scope="module")
def lib():
    lib = load_library()
    g, s = C.POINTER(Group), C.POINTER(ShardLayout)
    lib.luminav_sharded_exchanges.argtypes = [g, C.c_size_t]
    lib.luminav_sharded_exchange_doubles.restype = C.c_size_t
    lib.luminav_sharded_exchange_doubles.argtypes = [g, C.c_size_t, s]
    lib.luminav_sharded_workspace_bytes.restype = C.c_size_t
    lib.luminav_sharded_workspace_bytes.argtypes = [g, C.c_size_t, s]
    lib.luminav_step_groups_sharded.argtypes = [g, C.c_size_t, s, C.POINTER(Options), C.POINTER(Async), C.c_int,
                                                C.c_void_p]
    return lib


class Rank:
    """One shard (rows [r0, r1)) of the logical ROWS x COLS tensor with its own state, as a rank holds it."""

    def __init__(self, lib, hp, x, r0, r1, factored):
        self.lib, self.r0, self.r1 = lib, r0, r1
        n = (r1 - r0) * COLS
        self.x = x[r0 * COLS:r1 * COLS].copy()
        self.g = np.zeros(n, np.float32)
        self.m = np.zeros(n, np.float32)
        self.v = np.zeros(((r1 - r0) + COLS) if factored and n else n, np.float32)
        ptr = lambda a: a.ctypes.data if a.size else None  # noqa: E731
        self.desc = (Tensor * 1)(Tensor(ptr(self.x), ptr(self.g), ptr(self.m), ptr(self.v), None, n, r0 * COLS, 7,
                                        F32, F32, r1 - r0, TD_FACTORED))
        self.hp = hp
        self.groups = (Group * 1)(Group(C.pointer(hp), self.desc, 1, None, None, 0))
        self.shards = (ShardLayout * 1)(ShardLayout(ROWS * COLS, ROWS))
        self.workspace = np.zeros(lib.luminav_sharded_workspace_bytes(self.groups, 1, self.shards), np.uint8)
        self.exchange = np.zeros(lib.luminav_sharded_exchange_doubles(self.groups, 1, self.shards), np.float64)
        self.options = Options(b"scalar", 0, 0, None, self.workspace.ctypes.data, self.workspace.size)
        self.status = StepStatus()
        self.run = Async(C.pointer(self.status), None, None, None, 0)

    def phase(self, p, exchange=None):
        exchange = self.exchange if exchange is None else exchange
        return self.lib.luminav_step_groups_sharded(self.groups, 1, self.shards, C.byref(self.options),
                                                    C.byref(self.run), p, exchange.ctypes.data if exchange is not None
                                                    else None)


def step_all(lib, ranks, grad):
    """Every phase on every rank, the exchanges summed in between (the all-reduce); the last codes."""
    exchanges = lib.luminav_sharded_exchanges(ranks[0].groups, 1)
    for r in ranks:
        r.g[:] = grad[r.r0 * COLS:r.r1 * COLS]
    codes = []
    for p in range(exchanges + 1):
        codes = [r.phase(p) for r in ranks]
        if p < exchanges:
            total = sum(r.exchange for r in ranks)
            for r in ranks:
                r.exchange[:] = total
    return codes


def gathered(ranks):
    x = np.concatenate([r.x for r in ranks])
    m = np.concatenate([r.m for r in ranks])
    rows = np.concatenate([r.v[:r.r1 - r.r0] for r in ranks])
    col = next(r.v[r.r1 - r.r0:] for r in ranks if r.v.size)
    return x, m, np.concatenate([rows, col])


@pytest.mark.parametrize("changes", [dict(), dict(cautious=1, bound_mode=1, bound_ratio=0.002, lam=0.3, tau=0.5)],
                         ids=["factored", "factored-cautious-bound"])
def test_shards_stepped_phase_by_phase_match_the_reference(lib, changes):
    hp = hyperparams(lib, lr=1e-2, weight_decay=0.1, buffer_mode=1, **changes)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(ROWS * COLS).astype(np.float32)
    ranks = [Rank(lib, hp, x0, 0, 4, True), Rank(lib, hp, x0, 4, 4, True), Rank(lib, hp, x0, 4, ROWS, True)]
    assert lib.luminav_sharded_exchanges(ranks[0].groups, 1) == (2 if changes else 1)
    x, m, v = x0.astype(np.float64), np.zeros(ROWS * COLS), np.zeros(ROWS + COLS)
    for t in (1, 2, 3):
        g = (rng.standard_normal(ROWS * COLS) * 0.01 + 0.002).astype(np.float32)
        hp.step = t
        assert step_all(lib, ranks, g) == [0, 0, 0], lib.luminav_last_error_message()
        ref_hp = dataclasses.replace(as_hyper(hp), td_factor="factored")
        ref = reference_step(ref_hp, x, m, v, g, t, rows=ROWS)
        got_x, got_m, got_v = gathered(ranks)
        factor = accuracy_factor(ref_hp)
        assert_within_forward_error(f"x t={t}", got_x, ref.x, ref.scale_x, factor)
        assert_within_forward_error(f"m t={t}", got_m, ref.m, ref.scale_m, factor)
        assert_within_forward_error(f"v t={t}", got_v, ref.v, ref.scale_v)
        x, m, v = got_x.astype(np.float64), got_m.astype(np.float64), got_v.astype(np.float64)


def test_a_nan_on_one_shard_stops_every_shard(lib):
    hp = hyperparams(lib, lr=1e-2, buffer_mode=1, step=1)
    x0 = np.ones(ROWS * COLS, np.float32)
    ranks = [Rank(lib, hp, x0, 0, 4, True), Rank(lib, hp, x0, 4, ROWS, True)]
    g = np.full(ROWS * COLS, 0.1, np.float32)
    g[-1] = np.nan  # on the second shard only
    assert step_all(lib, ranks, g) == [NONFINITE, NONFINITE]
    assert all(r.status.verdict == 1 for r in ranks)  # 1 + the tensor's position
    for r in ranks:
        assert (r.x == 1).all() and (r.m == 0).all() and (r.v == 0).all()
    # found_inf on one rank: every rank skips.
    g[-1] = 0.1
    found = np.ones(1, np.float32)
    ranks[0].run.found_inf = found.ctypes.data
    assert step_all(lib, ranks, g) == [0, 0]
    assert all(r.status.skipped == 1 for r in ranks) and all((r.x == 1).all() for r in ranks)


def test_error_rows(lib):
    hp = hyperparams(lib, lr=1e-2, buffer_mode=1, step=1)
    x0 = np.ones(ROWS * COLS, np.float32)
    r = Rank(lib, hp, x0, 0, 4, True)
    r.g[:] = 0.1
    assert r.phase(2) == INVALID and b"phase must be in [0, 1]" in lib.luminav_last_error_message()
    assert r.lib.luminav_step_groups_sharded(r.groups, 1, r.shards, C.byref(r.options), C.byref(r.run), 0,
                                             None) == INVALID
    assert b"exchange must not be NULL" in lib.luminav_last_error_message()
    assert lib.luminav_step_groups_sharded(r.groups, 1, None, C.byref(r.options), C.byref(r.run), 0,
                                           r.exchange.ctypes.data) == INVALID
    assert b"shards must not be NULL" in lib.luminav_last_error_message()
    small = Options(b"scalar", 0, 0, None, r.workspace.ctypes.data, 8)
    assert lib.luminav_step_groups_sharded(r.groups, 1, r.shards, C.byref(small), C.byref(r.run), 0,
                                           r.exchange.ctypes.data) == INVALID
    assert b"luminav_sharded_workspace_bytes" in lib.luminav_last_error_message()
    r.desc[0].index_offset = 3  # a boundary inside a row
    assert r.phase(0) == INVALID and b"inside a row" in lib.luminav_last_error_message()
    r.desc[0].index_offset = ROWS * COLS  # past the logical tensor
    assert r.phase(0) == INVALID and b"outside its logical tensor" in lib.luminav_last_error_message()
    r.desc[0].index_offset = 0
    # The ranks disagree on the logical tensor: the reduced element count tells, on every rank.
    assert r.phase(0) == 0
    assert r.phase(1) == INVALID and b"the ranks disagree" in lib.luminav_last_error_message()
    assert (r.x == 1).all()
