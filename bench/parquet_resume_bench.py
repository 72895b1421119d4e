"""Resume deep inside one large Parquet row group (issue 21): page skipping through the file's page
index against decode-and-discard (the same file written without a page index), side by side.

    .venv/bin/python bench/parquet_resume_bench.py [--rows 60000] [--at 0.9] [--repeats 5]

One row group of --rows documents (~600 B of random words each, zstd, 64 KiB pages). A pipeline run with every stage
off is SIGKILLed right after its checkpoint at row --at x rows (part size = that row count); the
resumed run is then timed (it decodes from the checkpoint row to the end either way). The
checkpointed directory is copied before each timed resume, so every repeat resumes from the same state.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import sys
from luminamoon.data.pipeline import FusedPipeline
FusedPipeline(format="parquet", clean=False, quality=False, dedup=False, minhash=False, pii=False,
              part_rows=int(sys.argv[3]), batch_docs=1000).run(sys.argv[1], sys.argv[2])
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=60000)
    ap.add_argument("--at", type=float, default=0.9)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq
    work = tempfile.mkdtemp(prefix="lm-pq-resume-")
    import random
    rng = random.Random(1)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    texts = [" ".join(rng.choices(vocab, k=100)) for _ in range(args.rows)]  # ~600 B, compresses like text
    table = pa.table({"id": [f"d{i}" for i in range(args.rows)], "text": texts})
    part_rows = int(args.rows * args.at)
    states = {}
    for name, index in (("page_index", True), ("decode_discard", False)):
        src = os.path.join(work, f"{name}.parquet")
        pq.write_table(table, src, row_group_size=args.rows, data_page_size=64 << 10, write_batch_size=64,
                       write_page_index=index,
                       compression="zstd")
        state = os.path.join(work, f"{name}-state")
        env = dict(os.environ, LUMINAMOON_TEST_CRASH_AT="meta_written:1")
        r = subprocess.run([sys.executable, "-c", CHILD, src, state, str(part_rows)], env=env)
        assert r.returncode == -9, r.returncode
        states[name] = (src, state)
    from luminamoon import _data_io
    from luminamoon.data.pipeline import FusedPipeline
    times = {name: [] for name in states}
    skipped = {}
    for _ in range(args.repeats):
        for name, (src, state) in states.items():
            out = os.path.join(work, f"{name}-run")
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(state, out)
            before = _data_io._parquet_pages_skipped()
            t = time.perf_counter()
            FusedPipeline(format="parquet", clean=False, quality=False, dedup=False, minhash=False, pii=False,
                          part_rows=part_rows, batch_docs=1000).run(src, out)
            times[name].append(time.perf_counter() - t)
            skipped[name] = _data_io._parquet_pages_skipped() - before
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"rows": args.rows, "resume_row": part_rows, "file_mb": os.path.getsize(states["page_index"][0]) / 1e6,
                      "load_avg": os.getloadavg(), "resume_seconds_median": med, "runs": times,
                      "pages_skipped": skipped, "speedup": med["decode_discard"] / med["page_index"]}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
