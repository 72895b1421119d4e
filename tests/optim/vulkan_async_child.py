"""Run by test_vulkan_async.py in a fresh process (the environment read when the Vulkan context
is made applies: LUMINAV_VULKAN_IMPORT, LUMINAV_VULKAN_MAX_RANGE, LUMINAV_VULKAN_VALIDATION):
luminav_step_groups_enqueue on the vulkan backend (Note [Vulkan asynchronous step]) against the
synchronous luminav_step_groups on the same backend, bit for bit, and its error and memory rules.
`python vulkan_async_child.py checks [--timing] [--quick]` exits 1 with the failure, else prints a JSON line;
`python vulkan_async_child.py exit-in-flight` enqueues a large step and exits at once;
`python vulkan_async_child.py many [--expect-sync]` runs only the 150-tensor call (with a lowered
LUMINAV_VULKAN_MAX_ALLOCATIONS: back-pressure, or the synchronous fallback)."""
from __future__ import annotations

import ctypes as C
import json
import sys
import time

import numpy as np

from luminav_ctypes import Async, Group, Options, StepStatus, Tensor, hyperparams, load_library
from luminav_reference import bf16_rne_bits

F32, BF16, F16 = 0, 1, 2
NONFINITE = 2  # LUMINAV_STATUS_NONFINITE_GRAD

lib = load_library()
lib.luminav_step_groups.argtypes = [C.POINTER(Group), C.c_size_t, C.POINTER(Options), C.POINTER(Async)]
lib.luminav_step_groups_enqueue.argtypes = [C.POINTER(Group), C.c_size_t, C.POINTER(Options), C.POINTER(Async)]
lib.luminav_synchronize.argtypes = [C.POINTER(Options)]
VULKAN = Options(b"vulkan", 0, 0, None, None, 0)
# The library writes a step's status copy when it sees the step complete, after the call returned:
# a word that lives as long as the process, for the calls that do not look at it.
SCRATCH_STATUS = StepStatus()


class State:
    """One tensor's arrays: param (dtype), grad (dtype), m, v, optional fp32 master."""

    def __init__(self, n, seed, pdtype=F32, gdtype=F32, master=False, bad_at=None):
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal(n) * 0.5).astype(np.float32)
        g = (rng.standard_normal(n) * 0.01 + 0.003).astype(np.float32)
        if bad_at is not None:
            g[bad_at] = np.nan
        self.pdtype, self.gdtype = pdtype, gdtype
        self.param = {F32: lambda: x.copy(), BF16: lambda: bf16_rne_bits(x), F16: lambda: x.astype(np.float16)}[pdtype]()
        self.grad = {F32: lambda: g, BF16: lambda: bf16_rne_bits(g), F16: lambda: g.astype(np.float16)}[gdtype]()
        self.m = (rng.standard_normal(n) * 0.01).astype(np.float32)
        self.v = np.abs(rng.standard_normal(n) * 1e-4).astype(np.float32)
        self.master = x.copy() if master else None

    def copy(self):
        other = object.__new__(type(self))
        other.__dict__ = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        return other

    def tensor(self, seed=7):
        master = self.master.ctypes.data if self.master is not None else None
        return Tensor(self.param.ctypes.data, self.grad.ctypes.data, self.m.ctypes.data, self.v.ctypes.data, master,
                      self.param.size, 0, seed, self.pdtype, self.gdtype, 0, 0)

    def bits(self):
        arrays = [self.param, self.m, self.v] + ([self.master] if self.master is not None else [])
        return b"".join(a.tobytes() for a in arrays)


def call(fn, specs, status=None, skip=0, grad_scale=None, words=None, found_inf=None):
    """specs: [(hp, [State...])]: one luminav_step_groups(_enqueue) call over every group; words:
    per group (step_counter float32[1] or None, lr float32[1] / float64[1] or None); found_inf:
    a float32[1] or None."""
    keep, groups = [], []
    words = words or [(None, None)] * len(specs)
    for (hp, states), (counter, lr) in zip(specs, words):
        arr = (Tensor * len(states))(*[s.tensor(seed=11 + i) for i, s in enumerate(states)])
        keep.append(arr)
        lr_dtype = 1 if lr is not None and lr.dtype == np.float64 else 0  # LUMINAV_SCALAR_F64 / F32
        groups.append(Group(C.pointer(hp), arr, len(states), counter.ctypes.data if counter is not None else None,
                            lr.ctypes.data if lr is not None else None, lr_dtype))
    garr = (Group * len(groups))(*groups)
    status = status if status is not None else SCRATCH_STATUS
    scale = C.c_float(grad_scale) if grad_scale is not None else None
    a = Async(C.pointer(status), None, C.cast(C.pointer(scale), C.c_void_p) if scale is not None else None,
              found_inf.ctypes.data if found_inf is not None else None, skip)
    return fn(garr, len(groups), C.byref(VULKAN), C.byref(a))


def message():
    return lib.luminav_last_error_message().decode()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def bit_identical(lib_hp, big_n):
    """Several steps enqueued back to back (more than the 4 allowed in flight) equal the same steps
    run synchronously, for every dtype and option the asynchronous step covers; `big_n` > 2^20
    gives a tensor of more than 256 tiles (Note [tile combination order] wraps around its lanes)."""
    cases = [
        ("f32", [(lib_hp(step=3), [State(5000, 1)])], None),
        ("f32-cautious-tensorbound-tiles-wrap", [(lib_hp(step=3, cautious=1, bound_mode=1, bound_ratio=1e-3, tau=0.5),
                                                  [State(big_n, 2)])], None),
        ("bf16-master-sr", [(lib_hp(step=3, lam=0.3), [State(40000, 3, BF16, F32, master=True)])], None),
        ("f16-f16grad-master-elementbound", [(lib_hp(step=3, bound_mode=2, bound_ratio=5e-3),
                                              [State(40000, 4, F16, F16, master=True)])], None),
        ("two-groups-three-tensors-gradscale", [(lib_hp(step=3, cautious=1), [State(3000, 5), State(9000, 6, BF16)]),
                                                (lib_hp(step=5, lr=3e-3, bound_mode=1, bound_ratio=1e-3),
                                                 [State(70000, 7)])], 1024.0),
    ]
    for name, specs, scale in cases:
        mirror = [(hp, [s.copy() for s in states]) for hp, states in specs]
        for _ in range(5):
            code = call(lib.luminav_step_groups, mirror, grad_scale=scale)
            check(code == 0, f"{name}: synchronous step: {code} {message()}")
        for _ in range(5):
            code = call(lib.luminav_step_groups_enqueue, specs, grad_scale=scale)
            check(code == 0, f"{name}: enqueue: {code} {message()}")
        check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, f"{name}: synchronize: {message()}")
        check(lib.luminav_last_backend().decode().startswith("vulkan"), lib.luminav_last_backend())
        for (_, a), (_, b) in zip(specs, mirror):
            for i, (s, t) in enumerate(zip(a, b)):
                check(s.bits() == t.bits(), f"{name}: tensor {i} differs from the synchronous path")
    return len(cases)


def device_words(lib_hp):
    """step_counter, lr and found_inf read and written when the step runs (Note [device step
    counter]): steps enqueued back to back (more than the 4 in flight) equal the synchronous ones,
    the counters advanced by the steps that applied and stochastic rounding's t the counter's; a
    NaN step under found_inf (GradScaler: skip_nonfinite) sets it on the device, so the step enqueued
    after it, before it ran, is skipped; a found_inf already set skips the call and writes nothing;
    without skip_nonfinite the NaN is reported by the next call, found_inf set, nothing written."""
    hps = [lib_hp(step=1, cautious=1), lib_hp(step=4, bound_mode=1, bound_ratio=1e-3), lib_hp(step=9, lr=3e-3)]

    def setup(bad=False):
        states = [[State(3000, 30), State(20000, 31, BF16)], [State(9000, 32, F16, F16, master=True)],
                  [State(5000, 33, BF16, bad_at=123 if bad else None)]]
        words = [(np.array([6.0], np.float32), np.array([2e-3], np.float64)),
                 (None, np.array([5e-4], np.float32)),
                 (np.array([2.0], np.float32), None)]
        return list(zip(hps, states)), words

    def snapshot(specs, words, found_inf=None):
        out = [s.bits() for _, states in specs for s in states]
        out += [w.tobytes() for pair in words for w in pair if w is not None]
        return out + ([found_inf.tobytes()] if found_inf is not None else [])

    def run(fn, calls, bad_at_call=None, skip=0):
        """`calls` calls over the same arrays; the one at bad_at_call with a NaN in the last group."""
        specs, words = setup()
        found_inf = np.zeros(1, np.float32)
        status = StepStatus(0xDEAD, 0, 0, 0)
        target = specs[2][1][0]
        clean = target.grad
        nan = clean.copy()
        nan[123] = np.nan
        codes = []
        for i in range(calls):
            target.grad = nan if i == bad_at_call else clean  # both stay alive until synchronize
            codes.append(fn_call(fn, specs, status, skip, words, found_inf))
            if i == 0 and fn is lib.luminav_step_groups_enqueue:
                # Enqueued, not run synchronously: the status copy is written only once the step is
                # seen complete, by a later call (a synchronous fallback fills it on return).
                check(status.verdict == 0xDEAD, "a step with step counters / lr / found_inf ran synchronously")
        if fn is lib.luminav_step_groups_enqueue:
            codes.append(lib.luminav_synchronize(C.byref(VULKAN)))
        target.grad = clean
        return snapshot(specs, words, found_inf), codes, status

    def fn_call(fn, specs, status, skip, words, found_inf):
        return call(fn, specs, status, skip=skip, grad_scale=512.0, words=words, found_inf=found_inf)

    sync, codes, _ = run(lib.luminav_step_groups, 6)
    check(codes == [0] * 6, f"synchronous: {codes} {message()}")
    mine, codes, clean_status = run(lib.luminav_step_groups_enqueue, 6)
    check(codes == [0] * 7, f"enqueue: {codes} {message()}")
    skipped_before = clean_status.skipped  # the copy of the process's word: its counts so far
    check(lib.luminav_last_backend().decode().startswith("vulkan"), lib.luminav_last_backend())
    check(mine == sync, "step counters / lr / found_inf: the asynchronous steps differ from the synchronous ones")
    check(np.frombuffer(mine[-2], np.float32)[0] == 2.0 + 6, "the counter was not advanced by every step")
    # GradScaler: the NaN at the second call sets found_inf; the later calls are skipped.
    sync, codes, sync_status = run(lib.luminav_step_groups, 4, bad_at_call=1, skip=1)
    mine, mcodes, status = run(lib.luminav_step_groups_enqueue, 4, bad_at_call=1, skip=1)
    check(codes == [0] * 4 and mcodes == [0] * 5, f"{codes} {mcodes} {message()}")
    check(mine == sync, "found_inf: the asynchronous steps differ from the synchronous ones")
    check(np.frombuffer(mine[-1], np.float32)[0] == 1.0, "found_inf was not set")
    check(np.frombuffer(mine[-2], np.float32)[0] == 2.0 + 1, "a skipped step advanced the counter")
    check(status.verdict == sync_status.verdict == 0xFFFFFFFF and
          status.skipped - skipped_before == sync_status.skipped == 3,
          f"verdict {status.verdict:#x} skipped {status.skipped} - {skipped_before} (synchronous {sync_status.skipped})")
    # found_inf set before the call: nothing written.
    specs, words = setup()
    before = snapshot(specs, words)
    set_inf = np.ones(1, np.float32)
    check(fn_call(lib.luminav_step_groups_enqueue, specs, StepStatus(), 0, words, set_inf) == 0, message())
    check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, message())
    check(snapshot(specs, words) == before, "a step under a set found_inf wrote")
    # Without skip_nonfinite: reported by the next call, found_inf set, nothing written.
    specs, words = setup(bad=True)
    before = snapshot(specs, words)
    found_inf = np.zeros(1, np.float32)
    check(fn_call(lib.luminav_step_groups_enqueue, specs, StepStatus(), 0, words, found_inf) == 0, message())
    code = lib.luminav_synchronize(C.byref(VULKAN))
    check(code == NONFINITE and "position 3" in message(), f"{code} {message()}")
    check(snapshot(specs, words) == before and found_inf[0] == 1.0, "the failed step wrote, or found_inf not set")
    return 4


def returns_before_completion(lib_hp, n):
    """The call returns before the device ran the step; the caller's status copy is filled when
    the step is seen complete (synchronize)."""
    s = State(n, 8)
    before = s.bits()
    status = StepStatus(0xDEAD, 0, 0, 0)
    t0 = time.perf_counter()
    check(call(lib.luminav_step_groups_enqueue, [(lib_hp(step=2), [s])], status) == 0, message())
    t1 = time.perf_counter()
    check(status.verdict == 0xDEAD, "the status copy was written before the step was seen complete")
    check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, message())
    t2 = time.perf_counter()
    check(status.verdict == 0, f"verdict {status.verdict} after synchronize")
    check(s.bits() != before, "the step wrote nothing")
    if t2 - t0 > 0.05:  # a step slow enough to tell (lavapipe); a GPU's can take less than a call
        check(t1 - t0 < 0.2 * (t2 - t0), f"enqueue took {t1 - t0:.3f} s of {t2 - t0:.3f} s")
    return {"n": n, "enqueue_s": t1 - t0, "step_s": t2 - t0}


def nonfinite_reported_at_next_call(lib_hp):
    """A NaN gradient: nothing written by that step or by the steps enqueued after it; the error
    comes from the first call that finds the step complete, once; then steps apply again."""
    clean = State(4096, 9)
    bad = State(4096, 10, bad_at=77)
    originals = [clean.bits(), bad.bits()]
    hp = lib_hp(step=2)
    status = StepStatus()
    check(call(lib.luminav_step_groups_enqueue, [(hp, [clean, bad])], status) == 0, message())
    accepted, code = 0, 0
    for attempt in range(100):
        if attempt:  # the first at once: accepted while the NaN step is in flight, refused on the device
            time.sleep(0.05)
        code = call(lib.luminav_step_groups_enqueue, [(hp, [clean, bad])], status)
        if code != 0:
            break
        accepted += 1
    check(code == NONFINITE, f"status {code} ({message()}), {accepted} steps accepted after the NaN")
    check("position 1" in message(), message())
    check(status.verdict == 2 and status.failed == 0 and status.refused == accepted,
          f"verdict {status.verdict} failed {status.failed} refused {status.refused} (accepted {accepted})")
    check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, "reported twice: " + message())
    check([clean.bits(), bad.bits()] == originals, "a refused or failed step wrote")
    # synchronize reports too; skip_nonfinite counts instead.
    check(call(lib.luminav_step_groups_enqueue, [(hp, [clean, bad])]) == 0, message())
    check(lib.luminav_synchronize(C.byref(VULKAN)) == NONFINITE, "synchronize did not report")
    check([clean.bits(), bad.bits()] == originals, "the failed step wrote")
    skipped = StepStatus()
    check(call(lib.luminav_step_groups_enqueue, [(hp, [clean, bad])], skipped, skip=1) == 0, message())
    check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, message())
    check(skipped.skipped == 1 and skipped.verdict == 2 and skipped.failed == 0, "skip_nonfinite")
    check([clean.bits(), bad.bits()] == originals, "the skipped step wrote")
    # Applies again, as the synchronous step does.
    mirror = clean.copy()
    check(call(lib.luminav_step_groups, [(hp, [mirror])]) == 0, message())
    check(call(lib.luminav_step_groups_enqueue, [(hp, [clean])]) == 0, message())
    check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, message())
    check(clean.bits() == mirror.bits(), "the step after the report differs from the synchronous one")
    return accepted


TD_FACTORED, TD_ROW, TD_TENSOR = 0, 1, 2


class TdState(State):
    """A TD-CLM tensor: exp_avg_sq holds its second moment (row then col, row, or s), positive."""

    def __init__(self, n, seed, td_factor, rows, pdtype=F32, master=False, bad_at=None):
        super().__init__(n, seed, pdtype, F32, master, bad_at)
        self.td_factor, self.rows = td_factor, rows
        length = lib.luminav_exp_avg_sq_length(n, rows, 1, td_factor)  # LUMINAV_MODE_TDCLM
        self.v = np.abs(np.random.default_rng(seed + 1).standard_normal(length) * 1e-4).astype(np.float32)

    def tensor(self, seed=7):
        t = super().tensor(seed)
        t.rows, t.td_factor = self.rows, self.td_factor
        return t


def tdclm_on_the_device(lib_hp):
    """TD-CLM (factored, row, tensor, one column) enqueued: the second moment formed on the device
    (lv_finalize.comp's factors mode), the same bits as the synchronous step (whose factors the host
    forms: the shader states its formulas in its order); a NaN writes nothing, factors included, and
    is reported by the next call."""
    cases = [
        ("factored-cautious-tensorbound", lib_hp(step=3, buffer_mode=1, cautious=1, bound_mode=1, bound_ratio=1e-3),
         [TdState(64 * 300, 40, TD_FACTORED, 64)]),
        ("factored-wide-rows-tau-bf16-sr", lib_hp(step=3, buffer_mode=1, tau=0.5),
         [TdState(24 * 700, 41, TD_FACTORED, 24, BF16, master=True)]),
        ("row-lam-and-tensor-cautious", lib_hp(step=5, buffer_mode=1, lam=0.3, cautious=1),
         [TdState(100 * 50, 42, TD_ROW, 100), TdState(9000, 43, TD_TENSOR, 1)]),
        ("one-column-and-tensor", lib_hp(step=2, buffer_mode=1, bound_mode=2, bound_ratio=5e-3),
         [TdState(4000, 44, TD_FACTORED, 4000), TdState(3000, 45, TD_TENSOR, 1, F16)]),
    ]
    for name, hp, states in cases:
        mirror = [s.copy() for s in states]
        old_v = [s.v.copy() for s in states]
        for _ in range(5):
            check(call(lib.luminav_step_groups, [(hp, mirror)]) == 0, f"{name}: synchronous: {message()}")
        check(all(not np.array_equal(s.v, v) for s, v in zip(mirror, old_v)), f"{name}: the second moment is unchanged")
        for k in range(5):
            status = StepStatus(0xDEAD, 0, 0, 0)
            check(call(lib.luminav_step_groups_enqueue, [(hp, states)], status) == 0, f"{name}: enqueue: {message()}")
            if k == 0:
                check(status.verdict == 0xDEAD, f"{name}: TD-CLM ran synchronously")
        check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, f"{name}: synchronize: {message()}")
        for i, (s, t) in enumerate(zip(states, mirror)):
            check(s.bits() == t.bits(), f"{name}: tensor {i} differs from the synchronous path")
    # A NaN in the factored tensor: nothing of the call written (factors, s, moments, parameters).
    hp = lib_hp(step=2, buffer_mode=1, cautious=1)
    good, bad = TdState(32 * 200, 46, TD_TENSOR, 1), TdState(32 * 200, 47, TD_FACTORED, 32, bad_at=999)
    before = [good.bits(), bad.bits()]
    check(call(lib.luminav_step_groups_enqueue, [(hp, [good, bad])]) == 0, message())
    code = call(lib.luminav_step_groups_enqueue, [(hp, [good, bad])])
    if code == 0:
        code = lib.luminav_synchronize(C.byref(VULKAN))
    else:
        check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, "reported twice: " + message())
    check(code == NONFINITE and "position 1" in message(), f"{code} {message()}")
    check([good.bits(), bad.bits()] == before, "a TD-CLM step with a NaN wrote")
    return len(cases)


def many_tensors(lib_hp, expect_async=True):
    """A call of 150 tensors (3 batches of the synchronous passes' 64; CLM and TD-CLM groups): pass
    1 of all, the one verdict, pass 2 of all, in one step (Note [Vulkan asynchronous step]): the
    same bits as the synchronous step; a NaN in the last tensor writes nothing in any tensor (the
    first batch's included) and is reported by the next call. `expect_async` False: the
    allocation budget (LUMINAV_VULKAN_MAX_ALLOCATIONS) is below the call's, which runs
    synchronously, with the same bits."""
    def states(bad=False):
        clm = [State(500 + 37 * i, 100 + i, BF16 if i % 3 == 0 else F32) for i in range(100)]
        td = [TdState(16 * (20 + i), 300 + i, (TD_FACTORED, TD_ROW, TD_TENSOR)[i % 3], 1 if i % 3 == 2 else 16)
              for i in range(50)]
        if bad:
            td[-1].grad[5] = np.nan
        return [(lib_hp(step=3, cautious=1), clm), (lib_hp(step=3, buffer_mode=1, bound_mode=1, bound_ratio=1e-3), td)]
    specs, mirror = states(), states()
    for _ in range(2):
        check(call(lib.luminav_step_groups, mirror) == 0, f"150 tensors: synchronous: {message()}")
    for k in range(2):
        status = StepStatus(0xDEAD, 0, 0, 0)
        check(call(lib.luminav_step_groups_enqueue, specs, status) == 0, f"150 tensors: enqueue: {message()}")
        if k == 0:
            check((status.verdict == 0xDEAD) == expect_async,
                  f"150 tensors: {'ran synchronously' if expect_async else 'enqueued beyond the allocation budget'}")
    check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, f"150 tensors: synchronize: {message()}")
    for (_, a), (_, b) in zip(specs, mirror):
        for i, (s, t) in enumerate(zip(a, b)):
            check(s.bits() == t.bits(), f"150 tensors: tensor {i} differs from the synchronous path")
    if not expect_async:
        return 150
    bad = states(bad=True)
    before = [s.bits() for _, group in bad for s in group]
    check(call(lib.luminav_step_groups_enqueue, bad) == 0, message())
    code = call(lib.luminav_step_groups_enqueue, bad)
    if code == 0:
        code = lib.luminav_synchronize(C.byref(VULKAN))
    else:
        check(lib.luminav_synchronize(C.byref(VULKAN)) == 0, "reported twice: " + message())
    check(code == NONFINITE and "position 149" in message(), f"{code} {message()}")
    check([s.bits() for _, group in bad for s in group] == before, "a step of 150 tensors with a NaN in the last wrote")
    return 150


def python_front_end():
    """luminamoon.optim.step(asynchronous=True): the same bits as the synchronous step; the arrays
    held until synchronize() even when the caller drops them; the NaN raised by synchronize()."""
    import gc
    import weakref

    from luminamoon import optim
    from luminamoon.optim import NonFiniteGradientError

    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, step=3, seed=5, backend="vulkan",
              cautious=True)

    def arrays(seed, bad=False):
        st = State(50000, seed, bad_at=11 if bad else None)
        return st.param, st.grad, st.m, st.v

    sync = arrays(20)
    optim.step(*sync, **kw)
    mine = arrays(20)
    optim.step(*mine, **kw, asynchronous=True)
    param, watch = mine[0], weakref.ref(mine[2])  # the caller keeps param and drops exp_avg
    del mine
    gc.collect()
    check(watch() is not None, "the exp_avg of a step in flight was freed")
    optim.synchronize("vulkan")
    check(param.tobytes() == sync[0].tobytes(), "the asynchronous step differs from optim.step")
    gc.collect()
    check(watch() is None, "synchronize() kept the arrays")
    bad = arrays(21, bad=True)
    before = [a.tobytes() for a in bad]
    optim.step(*bad, **kw, asynchronous=True)
    try:
        optim.synchronize()  # "auto" waits for every backend's steps, the forced vulkan ones too
        raise AssertionError("synchronize() raised nothing for a NaN gradient")
    except NonFiniteGradientError:
        pass
    check([a.tobytes() for a in bad] == before, "the NaN step wrote")


def main() -> int:
    lib_hp = lambda **kw: hyperparams(lib, **kw)  # noqa: E731
    if sys.argv[1] == "exit-in-flight":
        for _ in range(3):
            s, f = State(1 << 20, 13), TdState(1 << 18, 14, TD_FACTORED, 512)
            check(call(lib.luminav_step_groups_enqueue, [(lib_hp(step=2), [s]), (lib_hp(step=2, buffer_mode=1), [f])])
                  == 0, message())
            # The caller's memory must outlive its steps; the interpreter frees its objects before
            # the C exit handlers run, so these arrays are leaked on purpose.
            for a in (s.param, s.grad, s.m, s.v, f.param, f.grad, f.m, f.v):
                C.pythonapi.Py_IncRef(C.py_object(a))
        print("enqueued", flush=True)
        return 0  # the process exits with steps in flight
    out = {}
    if sys.argv[1] == "many":  # under a lowered allocation budget
        try:
            out["many_tensors"] = many_tensors(lib_hp, expect_async="--expect-sync" not in sys.argv)
        except AssertionError as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
        print(json.dumps(out))
        return 0
    try:
        out["bit_identical_cases"] = bit_identical(lib_hp, 70001 if "--quick" in sys.argv else (1 << 20) + 4099)
        out["accepted_after_nan"] = nonfinite_reported_at_next_call(lib_hp)
        out["device_word_cases"] = device_words(lib_hp)
        out["tdclm_cases"] = tdclm_on_the_device(lib_hp)
        out["many_tensors"] = many_tensors(lib_hp)
        python_front_end()
        if "--timing" in sys.argv:
            out["timing"] = returns_before_completion(lib_hp, 1 << 19)
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
