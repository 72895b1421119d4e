"""End-to-end data pipeline benchmark: luminamoon's FusedPipeline against a
datatrove pipeline of the same stages on its local executor, side by side in
one run over the same generated JSONL corpus (>= 100 MB).

    .venv/bin/python bench/pipeline_bench.py --size-mb 100 [--repeats 3] [--skip-datatrove]

Stages on both sides: read JSONL -> clean (newlines, control characters,
trailing spaces, blank-line runs) -> Gopher repetition -> Gopher quality ->
entropy -> near dedup (MinHash 5-grams, 64 hashes as 8 bands x 8 rows) -> PII
(e-mail, IP) -> write. luminamoon also runs its streaming exact dedup (datatrove
has none that streams; its MinHash removes exact duplicates too) and masks
more PII types: the comparison is conservative for luminamoon.
The corpus generator is luminamoon.data.cli.generate_corpus (also
`luminamoon data generate`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def corpus(path: str, size_mb: int) -> list[str]:
    from luminamoon.data.cli import generate_corpus
    marker = os.path.join(path, f".generated-{size_mb}mb")
    if not os.path.exists(marker):
        shutil.rmtree(path, ignore_errors=True)
        docs_per_shard = int(size_mb * 1e6 / 1450 / 8) + 1  # ~1.45 KB per generated line
        generate_corpus(path, shards=8, docs_per_shard=docs_per_shard, seed=1)
        open(marker, "w").close()
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".jsonl"))


def run_luminamoon(shards: list[str], work: str, threads: int, fmt: str) -> dict:
    from luminamoon.data.pipeline import FusedPipeline
    out = os.path.join(work, f"lm-{threads}")
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    summary = FusedPipeline(format=fmt, num_threads=threads).run(shards, out, resume=False)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "documents": summary["documents_in"], "bytes": summary["bytes_in"],
            "kept": summary["documents_kept"]}


def stage_breakdown(shards: list[str], work: str, threads: int, repeats: int) -> list[tuple]:
    """Reader + writer alone, then each stage alone, then all (NDJSON out): medians."""
    from luminamoon.data.pipeline import FusedPipeline
    stages = ("clean", "quality", "dedup", "minhash", "pii")
    rows = []
    for on in [(), *[(s,) for s in stages], stages]:
        times = []
        for _ in range(repeats):
            out = os.path.join(work, "breakdown")
            start = time.perf_counter()
            summary = FusedPipeline(format="ndjson", num_threads=threads,
                                    **{s: s in on for s in stages}).run(shards, out, resume=False)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        rows.append(("+".join(on) or "read+write only", seconds, summary["bytes_in"] / seconds / 1e6,
                     summary["documents_in"] / seconds))
    return rows


def run_datatrove(shards: list[str], work: str, workers: int) -> dict:
    """The datatrove pipeline, in a child process (its executor forks workers)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline_datatrove.py")
    out = os.path.join(work, "datatrove")
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    r = subprocess.run([sys.executable, script, os.path.dirname(shards[0]), out, str(workers)],
                       capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise RuntimeError("datatrove run failed:\n" + r.stderr[-3000:])
    result = json.loads(r.stdout.strip().splitlines()[-1])
    result["seconds"] = seconds
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datatrove-repeats", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "luminamoon-pipeline-bench"))
    ap.add_argument("--format", default="parquet")
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--breakdown", action="store_true", help="only time each stage alone (1 thread)")
    ap.add_argument("--datatrove-shards", type=int, default=0,
                    help="compare with datatrove on the first K shards only (0: all); luminamoon "
                         "runs on the same subset for the ratio")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    shards = corpus(os.path.join(args.work, "corpus"), args.size_mb)
    size = sum(os.path.getsize(s) for s in shards)
    cores = os.cpu_count() or 1
    if args.breakdown:
        print("| stages (1 thread, NDJSON out) | median s | MB/s | docs/s |")
        print("| --- | --- | --- | --- |")
        for name, seconds, mbs, dps in stage_breakdown(shards, args.work, 1, args.repeats):
            print(f"| {name} | {seconds:.2f} | {mbs:.1f} | {dps:,.0f} |")
        return 0
    results: dict = {"corpus_bytes": size, "shards": len(shards), "cores": cores,
                     "cpu": platform.processor() or platform.machine(), "runs": {}}
    for threads in sorted({1, cores}):
        runs = [run_luminamoon(shards, args.work, threads, args.format) for _ in range(args.repeats)]
        results["runs"][f"luminamoon_{threads}t"] = runs
    if not args.skip_datatrove:
        subset = shards[:args.datatrove_shards] if args.datatrove_shards else shards
        if len(subset) < len(shards):
            sub_dir = os.path.join(args.work, f"subset-{len(subset)}")
            os.makedirs(sub_dir, exist_ok=True)
            for s in subset:
                link = os.path.join(sub_dir, os.path.basename(s))
                if not os.path.exists(link):
                    os.symlink(s, link)
            subset = sorted(os.path.join(sub_dir, os.path.basename(s)) for s in subset)
            results["subset_bytes"] = sum(os.path.getsize(s) for s in subset)
            results["runs"][f"luminamoon-subset_{cores}t"] = [
                run_luminamoon(subset, args.work, cores, args.format) for _ in range(args.repeats)]
        results["runs"][f"datatrove_{cores}w"] = [run_datatrove(subset, args.work, cores)
                                                  for _ in range(args.datatrove_repeats)]
    print(f"corpus: {size / 1e6:.1f} MB in {len(shards)} shards, {cores} cores")
    print("| pipeline | threads | median s | docs/s | MB/s | docs/s per core | MB/s per core | kept |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    medians = {}
    for name, runs in results["runs"].items():
        seconds = statistics.median(r["seconds"] for r in runs)
        docs = runs[0]["documents"]
        threads = int(re.findall(r"_(\d+)", name)[0])
        nbytes = results.get("subset_bytes", size) if ("subset" in name or "datatrove" in name) else size
        dps, mbs = docs / seconds, nbytes / seconds / 1e6
        medians[name] = dps
        print(f"| {name.split('_')[0]} | {threads} | {seconds:.2f} | {dps:,.0f} | {mbs:.1f} | "
              f"{dps / threads:,.0f} | {mbs / threads:.1f} | {runs[0]['kept']} |")
    dt = medians.get(f"datatrove_{cores}w")
    if dt:
        ours = medians.get(f"luminamoon-subset_{cores}t", medians[f"luminamoon_{cores}t"])
        print(f"luminamoon ({cores} threads) / datatrove ({cores} workers) documents/s, same files: "
              f"{ours / dt:.1f}x")
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
