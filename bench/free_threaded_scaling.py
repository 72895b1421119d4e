"""Throughput of luminamoon from 1 and 2 Python threads, the work split by the caller (issue 22).

    python bench/free_threaded_scaling.py [--repeats 5] [--json out.json]

Run it under the free-threaded interpreter (GIL off), the same interpreter
with PYTHON_GIL=1 (GIL on: the same build and code, threads overlap only
inside native calls) and the normal interpreter. The native engines are held
to one thread each (luminav and data thread settings = 1), so that any
parallelism comes from the Python threads. A fixed amount of work is done by
one thread, then split in two halves over two threads; 1- and 2-thread runs
alternate and the medians are compared (speedup = t1 / t2). Each run also
records the CPU time of the worker threads per item: on a loaded machine the
wall-clock speedup says how many cores the run got, while CPU time per item
with 2 threads against 1 says whether the threads slow each other down
(contention on shared cache lines, locks) whatever the load.
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
    # 40,000 steps (session 2: 2,000; session 3: 10,000): a 2-thread window of ~0.1 s at ~5 us a call.
    "optim.step 4K floats": lambda: optim_work(4096, 40000),
    # 1,000 steps (sessions 2-6: 200): a 2-thread window of ~0.1 s like the others; at 200 (~21 ms) a
    # few milliseconds of the VM's steal time moved the ratio from 1.85x to 1.2x (session 7).
    "optim.step 256K floats": lambda: optim_work(262144, 1000),
    "clean_batch+mask_pii 64 docs": lambda: data_work(64, 400),
    "clean_batch+mask_pii 1024 docs": lambda: data_work(1024, 40),
}


def timed(make, run, total, threads, state_by="worker"):
    """(wall, worker CPU) seconds of `total` items split over `threads` threads.

    By default each thread makes its own state before the start line: objects a
    thread creates are owned by it (under the free-threaded interpreter their
    reference counts are thread-local, not atomics) and come from its own
    allocator heap, as in a program whose threads build their own work. With
    state_by="main" (sessions 2-3) the main thread makes every thread's arrays one
    after the other: each worker then counts references on objects it does not
    own (atomics), and two threads' array headers can share a cache line."""
    share = total // threads
    barrier = threading.Barrier(threads + 1)
    premade = [make() for _ in range(threads)] if state_by == "main" else [None] * threads
    starts, ends, cpu = [0.0] * threads, [0.0] * threads, [0.0] * threads

    def body(i, state):
        if state is None:
            state = make()
        barrier.wait()
        starts[i], c0 = time.perf_counter(), time.thread_time()
        run(state, share)
        ends[i], cpu[i] = time.perf_counter(), time.thread_time() - c0

    workers = [threading.Thread(target=body, args=(i, premade[i])) for i in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    for w in workers:
        w.join()
    # The window and the CPU time are read by the workers themselves: with two workers on
    # two cores the main thread can be descheduled right after the barrier and read its
    # clocks only once a worker is done, which made a 2-thread window look up to ~8x
    # shorter than it was (row W1, session 6: 256K floats at "36 us a step").
    return max(ends) - min(starts), sum(cpu)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--only", help="run the workloads whose name contains this text")
    ap.add_argument("--state-by", choices=("worker", "main"), default="worker",
                    help="which thread makes each worker's arrays and batches (see timed)")
    args = ap.parse_args()
    _native.set_num_threads(1)
    data.set_num_threads(1)
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    label = f"Python {sys.version.split()[0]}{' free-threaded' if 't' in sys.abiflags else ''}, GIL {'on' if gil else 'off'}"
    result = {"python": label, "state_by": args.state_by, "loadavg_before": os.getloadavg(), "workloads": {}}
    print(label, "| load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    for name, factory in WORKLOADS.items():
        if args.only and args.only not in name:
            continue
        make, run, total = factory()
        timed(make, run, total // 10 * 2, 2, args.state_by)  # warm-up (allocations, PII database)
        t1, t2, c1, c2 = [], [], [], []
        for _ in range(args.repeats):
            for walls, cpus, threads in ((t1, c1, 1), (t2, c2, 2)):
                wall, cpu = timed(make, run, total, threads, args.state_by)
                walls.append(wall)
                cpus.append(cpu)
        m1, m2 = statistics.median(t1), statistics.median(t2)
        cpu1, cpu2 = statistics.median(c1) / total * 1e6, statistics.median(c2) / total * 1e6
        result["workloads"][name] = {"items": total, "t1_s": m1, "t2_s": m2, "speedup": m1 / m2,
                                     "items_per_s_1": total / m1, "items_per_s_2": total / m2,
                                     "cpu_us_per_item_1": cpu1, "cpu_us_per_item_2": cpu2}
        print(f"  {name:<30} 1 thread {total / m1:9.0f}/s   2 threads {total / m2:9.0f}/s   speedup {m1 / m2:4.2f}x"
              f"   CPU/item {cpu1:8.2f} / {cpu2:8.2f} us")
    result["loadavg_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
