"""Throughput of luminamoon from 1 and 2 Python threads, the work split by the caller (issue 22).

    python bench/free_threaded_scaling.py [--repeats 5] [--json out.json]

Run it under the free-threaded interpreter (GIL off), the same interpreter
with PYTHON_GIL=1 (GIL on: the same build and code, threads overlap only
inside native calls) and the normal interpreter. The native engines are held
to one thread each (luminav and data thread settings = 1), so that any
parallelism comes from the Python threads. A fixed amount of work is done by
one thread, then split in two halves over two threads; 1- and 2-thread runs
alternate and the medians are compared (speedup = t1 / t2).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

from luminamoon import _native, data, optim


def optim_work(n: int, steps: int):
    """Per thread: `steps` LuminaV steps of one distinct n-float tensor."""
    def make():
        rng = np.random.default_rng(n)
        return (rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32),
                rng.standard_normal(n).astype(np.float32))

    def run(state, count):
        x, m, v, g = state
        for t in range(1, count + 1):
            optim.step(x, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=t)
    return make, run, steps


def data_work(docs: int, batches: int):
    """Per thread: clean_batch + mask_pii over `batches` distinct batches of `docs` documents."""
    words = "the quick brown fox jumps over the lazy dog and writes to someone@example.com".split()

    def make():
        rng = np.random.default_rng(docs)
        return [[" ".join(words[j] for j in rng.integers(0, len(words), 40)) + "  " for _ in range(docs)]
                for _ in range(4)]

    def run(state, count):
        for i in range(count):
            cleaned = data.clean_batch(state[i % len(state)])
            data.mask_pii(cleaned)
    return make, run, batches


def python_control(iterations: int):
    """The anchor: a pure-Python loop on each thread's own objects (no luminamoon).
    Under a GIL it cannot scale; free-threaded it shows what the machine's
    free cores allow in this run."""
    def make():
        return list(range(100))

    def run(state, count):
        for _ in range(count):
            total = 0
            for v in state:
                total += v * v
    return make, run, iterations


WORKLOADS = {
    "control: pure-Python loop": lambda: python_control(40000),
    # 10,000 steps (session 2: 2,000): a timed window of ~0.1 s now that a native call is ~10 us.
    "optim.step 4K floats": lambda: optim_work(4096, 10000),
    "optim.step 256K floats": lambda: optim_work(262144, 200),
    "clean_batch+mask_pii 64 docs": lambda: data_work(64, 400),
    "clean_batch+mask_pii 1024 docs": lambda: data_work(1024, 40),
}


def timed(make, run, total, threads):
    states = [make() for _ in range(threads)]
    share = total // threads
    barrier = threading.Barrier(threads + 1)

    def body(state):
        barrier.wait()
        run(state, share)

    workers = [threading.Thread(target=body, args=(s,)) for s in states]
    for w in workers:
        w.start()
    barrier.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    _native.set_num_threads(1)
    data.set_num_threads(1)
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    label = f"Python {sys.version.split()[0]}{' free-threaded' if 't' in sys.abiflags else ''}, GIL {'on' if gil else 'off'}"
    result = {"python": label, "loadavg_before": os.getloadavg(), "workloads": {}}
    print(label, "| load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    for name, factory in WORKLOADS.items():
        make, run, total = factory()
        timed(make, run, total // 10 * 2, 2)  # warm-up (allocations, PII database)
        t1, t2 = [], []
        for _ in range(args.repeats):
            t1.append(timed(make, run, total, 1))
            t2.append(timed(make, run, total, 2))
        m1, m2 = statistics.median(t1), statistics.median(t2)
        result["workloads"][name] = {"items": total, "t1_s": m1, "t2_s": m2, "speedup": m1 / m2,
                                     "items_per_s_1": total / m1, "items_per_s_2": total / m2}
        print(f"  {name:<30} 1 thread {total / m1:9.0f}/s   2 threads {total / m2:9.0f}/s   speedup {m1 / m2:4.2f}x")
    result["loadavg_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
