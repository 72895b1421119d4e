"""What a second busy core costs the first on this machine: the same fixed work (MinHash
signatures of 4,000 real documents, SIMD-bound; a scalar integer loop in Python) from one process,
then from two processes at once, whose timed windows start together (a barrier after each has
loaded its input). "throughput" is 2 x (1-process seconds) / (slower of the two): 2.0 when the
cores do not slow each other, about 1.0 when they share one core's units. Issue 17's row Y2 and
issue 22's row W1 ask for >= 1.7x / 1.8x from two cores; this says what the VM itself gives.

    .venv/bin/python bench/two_core_probe.py [--reps 5]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def minhash_work():
    """(setup done) -> a callable doing the fixed MinHash work."""
    import real_text_corpus

    import luminamoon.data as data
    texts = real_text_corpus.cached_texts("/tmp/luminamoon-real-text.jsonl.gz", 4000)
    tensor, lsh = data.StringTensor(texts), data.MinHashLSH(scheme="oph", num_threads=1)
    lsh.signatures(tensor, num_threads=1)  # warm-up

    def run():
        for _ in range(50):
            lsh.signatures(tensor, num_threads=1)
    return run


def scalar_work():
    def run():
        x = 0
        for i in range(6_000_000):
            x = (x * 31 + i) & 0xFFFFFFFF
    return run


WORKLOADS = {"minhash": minhash_work, "scalar": scalar_work}


def timed(name: str, barrier=None, out=None) -> float:
    run = WORKLOADS[name]()
    if barrier is not None:
        barrier.wait()
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    if out is not None:
        out.put(seconds)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for name in WORKLOADS:
        for _ in range(args.reps):
            alone = timed(name)
            barrier, out = mp.Barrier(2), mp.Queue()
            procs = [mp.Process(target=timed, args=(name, barrier, out)) for _ in range(2)]
            for p in procs:
                p.start()
            both = [out.get() for _ in procs]
            for p in procs:
                p.join()
            print(f"{name}: 1 process {alone:.2f} s; 2 at once {both[0]:.2f} / {both[1]:.2f} s -> throughput "
                  f"x{2 * alone / max(both):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
