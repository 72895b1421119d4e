"""The MinHash LSH index alone at scale: N random signatures (64 values, no
near duplicates: every document is kept and asks every band of every run)
added in batches of 50,000; CPU seconds, wall seconds and the index's memory.

    LUMINAMOON_LSH_TAIL_DOCS=16384 python bench/lsh_index_scale.py 1000000

Run it with PYTHONPATH at another build to compare (Note [band runs on disk]).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from luminamoon import data


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rng = np.random.default_rng(1)
    lsh = data.MinHashLSH()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for lo in range(0, n, 50_000):
        lsh.add_signatures(rng.integers(0, 2**61, size=(min(50_000, n - lo), 64), dtype=np.uint64))
    print(f"n={n} tail={os.environ.get('LUMINAMOON_LSH_TAIL_DOCS', 'default')} "
          f"cpu_s={time.process_time() - cpu0:.2f} wall_s={time.perf_counter() - wall0:.2f} "
          f"memory_mb={lsh.memory_bytes / 1e6:.1f} kept={len(lsh)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
