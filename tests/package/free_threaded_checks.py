"""Thread-safety checks of luminamoon, run as a script under a (free-threaded) interpreter.

    python free_threaded_checks.py [CHECK ...]   -> one JSON line per check: {"check", "ok", "detail"}

tests/package/test_free_threaded.py runs this under the free-threaded
CPython (and, for the checks that do not need it, under the test's own
interpreter): the checks are plain functions so that they run where pytest
is not installed. Every check compares against an independent expectation:
the float64 NumPy reference of the spec (tests/luminav_reference.py), a
single-threaded run of the same calls, or counts known by construction (each
distinct text appears K times: exactly one occurrence is kept).
"""
from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared references

import luminamoon  # noqa: E402
from luminamoon import _native, optim  # noqa: E402
from luminamoon import data  # noqa: E402

THREADS = 8


def run_threads(target, args_per_thread, *, barrier=True):
    """Runs target(*args) on one thread each, started together; re-raises the first error."""
    start = threading.Barrier(len(args_per_thread)) if barrier else None
    errors, results = [], [None] * len(args_per_thread)

    def body(i, args):
        try:
            if start is not None:
                start.wait()
            results[i] = target(*args)
        except BaseException as e:  # noqa: BLE001 (reported to the caller)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i, a)) for i, a in enumerate(args_per_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


# ---------------------------------------------------------------- checks


def check_gil_disabled():
    """Importing every native module leaves the GIL off (Py_mod_gil = Py_MOD_GIL_NOT_USED)."""
    import luminamoon.data  # noqa: F401
    import luminamoon.optim  # noqa: F401
    modules = ["luminamoon._native"]
    try:
        import pyarrow  # noqa: F401
        from luminamoon import _data_io  # noqa: F401
        modules.append("luminamoon._data_io")
    except ImportError:
        pass
    if not hasattr(sys, "_is_gil_enabled"):
        return True, "not a free-threaded-capable interpreter (no sys._is_gil_enabled)"
    enabled = sys._is_gil_enabled()
    return not enabled, f"sys._is_gil_enabled() = {enabled} after importing {', '.join(modules)}"


def _optim_state(seed, n):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    m = (0.1 * rng.standard_normal(n)).astype(np.float32)
    v = np.abs(0.01 * rng.standard_normal(n)).astype(np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    return x, m, v, grads


HP = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)


def _optim_steps(x, m, v, grads):
    for t, g in enumerate(grads, start=1):
        optim.step(x, g, m, v, **HP, step=t, seed=7)
    return x, m, v


def check_optim_threads():
    """8 threads stepping distinct tensors: bit-identical to one thread, within the spec's error bound."""
    from luminav_reference import Hyper, assert_within_forward_error, reference_step
    n = 50_000
    states = [_optim_state(100 + i, n) for i in range(THREADS)]
    serial = [_optim_steps(x.copy(), m.copy(), v.copy(), g) for x, m, v, g in states]
    threaded = run_threads(_optim_steps, [(x.copy(), m.copy(), v.copy(), g) for x, m, v, g in states])
    for i, (a, b) in enumerate(zip(serial, threaded)):
        for name, p, q in zip(("param", "exp_avg", "exp_avg_sq"), a, b):
            if not np.array_equal(p.view(np.uint32), q.view(np.uint32)):
                return False, f"thread {i}: {name} differs from the single-threaded run"
    # One step of each thread's tensor against the float64 reference of the spec.
    hyper = Hyper(**HP)
    for i, (x, m, v, grads) in enumerate(states):
        ref = reference_step(hyper, x, m, v, grads[0], 1)
        xs, ms, vs = x.copy(), m.copy(), v.copy()
        optim.step(xs, grads[0], ms, vs, **HP, step=1, seed=7)
        assert_within_forward_error(f"thread {i} exp_avg", ms, ref.m, ref.scale_m)
        assert_within_forward_error(f"thread {i} param", xs, ref.x, ref.scale_x)
    return True, f"{THREADS} threads x 4 steps x {n} floats: bit-identical to serial; spec bound holds"


def _batch_texts(seed, n=300):
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "paper", "light", "green"]
    texts = []
    for i in range(n):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
        if i % 7 == 0:
            body += f" write to user{i}@example.com today"
        if i % 11 == 0:
            body = "   \t" + body + "  \n\n\n"
        texts.append(body)
    return texts


def _data_stages(texts):
    cleaned = data.clean_batch(texts)
    masked, counts = data.mask_pii(cleaned)
    result = [cleaned.to_pylist(), masked.to_pylist(), counts]
    try:
        import pyarrow  # noqa: F401  (filter_quality returns its metrics as a pyarrow table)
        q = data.filter_quality(cleaned, min_words=10)
        result.append((q.keep.tolist(), q.reason))
    except ImportError:
        pass
    return result


def check_data_stages_threads():
    """clean_batch / filter_quality / mask_pii on distinct batches from 8 threads: same as one thread."""
    batches = [_batch_texts(i) for i in range(THREADS)]
    serial = [_data_stages(b) for b in batches]
    for _ in range(3):
        threaded = run_threads(_data_stages, [(b,) for b in batches])
        if threaded != serial:
            return False, "a threaded batch result differs from the single-threaded one"
    # Hand-written expectations on the known content.
    cleaned, masked, counts = serial[0][:3]
    emails = sum(1 for i in range(300) if i % 7 == 0)
    if counts.get("email") != emails or any("@example.com" in t for t in masked):
        return False, f"mask_pii: expected {emails} emails masked, got {counts}"
    if any(t != t.strip() for t in cleaned if t):
        return False, "clean_batch left leading/trailing blanks"
    stages = "clean, pii" + (", quality" if len(serial[0]) == 4 else " (no pyarrow: quality skipped)")
    return True, f"{THREADS} threads x 3 rounds x 300 docs ({stages}): identical to serial"


def _duplicated_stream(unique, copies, seed):
    """[(ref, text id, text)] where each of `unique` distinct texts appears `copies` times, shuffled."""
    rng = random.Random(seed)
    vocab = [f"w{rng.getrandbits(40):x}" for _ in range(5000)]
    texts = [" ".join(rng.choice(vocab) for _ in range(30)) for _ in range(unique)]
    docs = [(tid, texts[tid]) for tid in range(unique) for _ in range(copies)]
    rng.shuffle(docs)
    return [(ref, tid, text) for ref, (tid, text) in enumerate(docs)]


def _shared_adds(obj, docs, threads, batch, seed, readers=0):
    """Feeds `docs` in batches to one shared object from several threads in a
    random interleaving; returns {ref: (keep, matched)}."""
    batches = [docs[i:i + batch] for i in range(0, len(docs), batch)]
    random.Random(seed).shuffle(batches)
    per_thread = [batches[i::threads] for i in range(threads)]
    decisions, lock = {}, threading.Lock()
    stop = threading.Event()
    add = getattr(obj, "add_with_matches", obj.add)  # (keep, matched) from either class

    def feed(my_batches, tseed):
        rng = random.Random(tseed)
        for b in my_batches:
            refs = np.array([d[0] for d in b], dtype=np.int64)
            keep, matched = add([d[2] for d in b], refs=refs)
            with lock:
                for r, k, mt in zip(refs.tolist(), keep.tolist(), matched.tolist()):
                    if r in decisions:
                        raise AssertionError(f"ref {r} decided twice")
                    decisions[r] = (k, mt)
            if rng.random() < 0.3:
                time.sleep(rng.random() * 1e-3)

    def read():
        while not stop.is_set():
            len(obj), obj.documents_seen, obj.memory_bytes, obj.committed_position
            time.sleep(1e-4)

    reader_threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in reader_threads:
        t.start()
    try:
        run_threads(feed, [(b, seed * 100 + i) for i, b in enumerate(per_thread)])
    finally:
        stop.set()
        for t in reader_threads:
            t.join()
    return decisions


def _check_one_kept_per_text(decisions, docs, unique):
    """Exactly one occurrence of each distinct text kept; every drop names a kept copy of its text."""
    tid_of = {ref: tid for ref, tid, _ in docs}
    if len(decisions) != len(docs):
        return f"{len(decisions)} decisions for {len(docs)} documents (lost documents)"
    kept = {}
    for ref, (keep, _) in decisions.items():
        if keep:
            tid = tid_of[ref]
            if tid in kept:
                return f"text {tid} kept twice (refs {kept[tid]} and {ref})"
            kept[tid] = ref
    if len(kept) != unique:
        return f"{len(kept)} distinct texts kept, expected {unique}"
    for ref, (keep, matched) in decisions.items():
        if not keep and kept.get(tid_of[ref]) != matched:
            return f"ref {ref} dropped as a duplicate of {matched}, not of the kept copy {kept.get(tid_of[ref])}"
    return None


def check_shared_dedup(unique=3000, copies=4, threads=THREADS, batch=37, rounds=1, readers=0):
    """One StreamDeduplicator from several threads: no document lost, doubled or kept twice."""
    for r in range(rounds):
        docs = _duplicated_stream(unique, copies, seed=r)
        d = data.StreamDeduplicator()
        decisions = _shared_adds(d, docs, threads, batch, seed=r, readers=readers)
        problem = _check_one_kept_per_text(decisions, docs, unique)
        if problem is None and (len(d) != unique or d.documents_seen != unique * copies):
            problem = f"len {len(d)} / documents_seen {d.documents_seen}, expected {unique} / {unique * copies}"
        if problem:
            return False, f"round {r}: {problem}"
    return True, (f"{rounds} round(s): {unique} texts x {copies} copies in batches of {batch} from {threads} "
                  f"threads (+{readers} readers): each text kept once")


def check_shared_lsh(unique=1500, copies=3, threads=THREADS, batch=29, rounds=1, readers=0):
    """One MinHashLSH from several threads: exact copies are near duplicates (J = 1), distinct texts are not."""
    for r in range(rounds):
        docs = _duplicated_stream(unique, copies, seed=1000 + r)
        lsh = data.MinHashLSH(num_perm=64, bands=16, rows=4, ngram=3, threshold=0.8)
        decisions = _shared_adds(lsh, docs, threads, batch, seed=r, readers=readers)
        problem = _check_one_kept_per_text(decisions, docs, unique)
        if problem is None and (len(lsh) != unique or lsh.documents_seen != unique * copies):
            problem = f"kept {len(lsh)} / documents_seen {lsh.documents_seen}"
        if problem:
            return False, f"round {r}: {problem}"
    return True, (f"{rounds} round(s): {unique} texts x {copies} copies from {threads} threads "
                  f"(+{readers} readers): each text kept once")


def check_stress():
    """Many threads, small batches, random pauses, concurrent readers, several rounds."""
    ok, detail = check_shared_dedup(unique=2000, copies=5, threads=16, batch=7, rounds=4, readers=2)
    if not ok:
        return ok, "dedup: " + detail
    ok2, detail2 = check_shared_lsh(unique=800, copies=4, threads=16, batch=5, rounds=3, readers=2)
    return ok2, f"dedup: {detail}; lsh: {detail2}"


class _SlowTensor:
    """Stands in for a torch tensor whose data_ptr() takes a while (the plan calls it)."""

    def __init__(self, pause):
        self.pause = pause
        self.buf = np.zeros(1, np.float32)

    def data_ptr(self):
        time.sleep(self.pause)
        return self.buf.__array_interface__["data"][0]


def check_step_plan_refuses_second_thread():
    """A StepPlan in use by one thread refuses another with a RuntimeError (never a torn step)."""
    plan = _native.StepPlan("auto", _native.DEVICE_CPU, 0)
    group = {k: None for k in ("mode", "bound", "cautious", "check_finite", "stochastic_rounding",
                               "master_weights", "backend", "td_factor")}
    hp = _native.Hyperparams()
    started = threading.Event()

    def slow_add():
        started.set()
        plan.add_group(group, hp, [], _SlowTensor(0.5), None, 0)

    t = threading.Thread(target=slow_add)
    t.start()
    started.wait()
    time.sleep(0.1)
    try:
        plan.num_tensors()
        refused = None
    except RuntimeError as e:
        refused = str(e)
    t.join()
    if not refused or "another thread" not in refused:
        return False, f"no refusal while the plan was in use (got {refused!r})"
    if plan.num_tensors() != 0:
        return False, "the plan is still claimed after the first thread finished"
    return True, f"refused: {refused}"


CHECKS = {
    "gil_disabled": check_gil_disabled,
    "optim_threads": check_optim_threads,
    "data_stages_threads": check_data_stages_threads,
    "shared_dedup": check_shared_dedup,
    "shared_lsh": check_shared_lsh,
    "stress": check_stress,
    "step_plan_refusal": check_step_plan_refuses_second_thread,
}


def main(argv):
    names = argv or list(CHECKS)
    failed = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            ok, detail = CHECKS[name]()
        except Exception:  # noqa: BLE001 (reported as a failed check)
            ok, detail = False, traceback.format_exc()
        failed += not ok
        print(json.dumps({"check": name, "ok": bool(ok), "detail": detail,
                          "seconds": round(time.perf_counter() - t0, 2),
                          "python": sys.version.split()[0], "luminamoon": luminamoon.__version__}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
