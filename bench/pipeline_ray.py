"""The FusedPipeline on Ray against the local executor, and datatrove's own
distributed MinHash deduplication, side by side in one run on the same files.

    .venv/bin/python bench/pipeline_ray.py --size-mb 100 [--repeats 3] [--skip-datatrove]

Runs (every one on the corpus of bench/pipeline_bench.py's generator, NDJSON out):
- local: FusedPipeline.run with 1 thread and with every core;
- ray 1 node / ray 2 nodes: a cluster of `ray start` nodes of one CPU each on
  this machine (tests/data/ray_cluster.py; inside a loopback-only network
  namespace when run as root), the driver joining it (--address): the time
  of the run, the cluster's start excluded; the output is checked equal to
  the local one;
- ray embedded: FusedPipeline.run(executor="ray", workers=cores), its own
  Ray instance started and stopped inside the timed run;
- dedup alone (cleaner on, quality/exact/PII off): ours local and on Ray 2
  nodes, and datatrove's MinhashDedupSignature -> MinhashDedupBuckets ->
  MinhashDedupCluster -> MinhashDedupFilter on its LocalPipelineExecutor with
  two tasks (two workers), 8 bands x 8 rows of 5-grams as ours.
Prints a Markdown table (medians) and the load averages around each run.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data"))

DEDUP_ONLY = dict(quality=False, dedup=False, pii=False)


def kept_rows(out: str) -> list:
    rows = []
    for p in sorted(glob.glob(os.path.join(out, "part-*.ndjson"))):
        with open(p, encoding="utf-8") as f:
            rows.extend(f.read().splitlines())
    return rows


def timed(fn) -> dict:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    summary = fn()
    seconds = time.perf_counter() - start
    print(f"  {seconds:.2f} s, load {load:.1f}..{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    return {"seconds": seconds, "documents": summary["documents_in"], "bytes": summary["bytes_in"],
            "kept": summary["documents_kept"], "load1_before": load, "load1_after": os.getloadavg()[0]}


def datatrove_dedup(corpus_dir: str, work: str, tasks: int) -> dict:
    """datatrove's four MinHash stages, in a child process (its executor forks)."""
    script = r'''
import json, os, sys
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashing import HashConfig
corpus, work, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = MinhashConfig(n_grams=5, num_buckets=8, hashes_per_bucket=8, hash_config=HashConfig(precision=64, hash_fc="sha1"))  # its xxhash path passes str to xxhash, which wants bytes here
sigs, buckets, remove, logs = (os.path.join(work, n) for n in ("signatures", "buckets", "remove_ids", "logs"))
s1 = LocalPipelineExecutor(pipeline=[JsonlReader(corpus, glob_pattern="*.jsonl"),
     MinhashDedupSignature(output_folder=sigs, config=config)], tasks=tasks, workers=tasks,
     logging_dir=os.path.join(logs, "1"))
s2 = LocalPipelineExecutor(pipeline=[MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=config)],
     tasks=config.num_buckets, workers=tasks, logging_dir=os.path.join(logs, "2"), depends=s1)
s3 = LocalPipelineExecutor(pipeline=[MinhashDedupCluster(input_folder=buckets, output_folder=remove, config=config)],
     tasks=1, workers=1, logging_dir=os.path.join(logs, "3"), depends=s2)
s4 = LocalPipelineExecutor(pipeline=[JsonlReader(corpus, glob_pattern="*.jsonl"),
     MinhashDedupFilter(input_folder=remove), JsonlWriter(os.path.join(work, "output"), compression=None)],
     tasks=tasks, workers=tasks, logging_dir=os.path.join(logs, "4"), depends=s3)
s4.run()
ids = set()
for f in os.listdir(os.path.join(work, "output")):
    for line in open(os.path.join(work, "output", f), encoding="utf-8"):
        ids.add(json.loads(line)["id"])
print(json.dumps({"kept_ids": sorted(ids)}))
'''
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", script, corpus_dir, work, str(tasks)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise RuntimeError("datatrove failed:\n" + r.stderr[-3000:])
    kept = json.loads(r.stdout.strip().splitlines()[-1])["kept_ids"]
    return {"seconds": seconds, "kept_ids": kept, "kept": len(kept), "load1_before": load,
            "load1_after": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "luminamoon-ray-bench"))
    ap.add_argument("--skip-datatrove", action="store_true")
    args = ap.parse_args()
    # A HOME of our own: another Ray user's ~/.ray/auth_token would turn on token auth
    os.environ["HOME"] = os.path.join(args.work, "home")
    os.makedirs(os.environ["HOME"], exist_ok=True)
    import ray
    from pipeline_bench import corpus
    from ray_cluster import Cluster, LoopbackNetns, connect
    from luminamoon.data import FusedPipeline

    os.makedirs(args.work, exist_ok=True)
    shards = corpus(os.path.join(args.work, "corpus"), args.size_mb)
    size = sum(os.path.getsize(s) for s in shards)
    cores = os.cpu_count() or 1
    try:
        netns = LoopbackNetns()
    except OSError as e:
        print(f"(no network namespace: {e}; Ray binds this machine's address)")
        netns = None
    runs: dict = {}
    out = os.path.join(args.work, "out")

    def local(threads: int, **stages):
        return lambda: FusedPipeline(format="ndjson", num_threads=threads, **stages).run(shards, out, resume=False)

    def on_ray(**kw):
        return lambda: FusedPipeline(format="ndjson", **kw.pop("stages", {})).run(
            shards, out, resume=False, executor="ray", **kw)

    reference = {}
    for name, fn in (("local 1 thread", local(1)), (f"local {cores} threads", local(cores))):
        runs[name] = [timed(fn) for _ in range(args.repeats)]
    reference["full"] = kept_rows(out)
    runs[f"local {cores} threads, dedup alone"] = [timed(local(cores, **DEDUP_ONLY)) for _ in range(args.repeats)]
    reference["dedup"] = kept_rows(out)
    ours_dedup_ids = None

    cluster = Cluster(os.path.join(args.work, "cluster"))
    equal = {}
    try:
        cluster.stop_worker()
        connect(cluster.address)
        runs["ray 1 node (1 CPU)"] = [timed(on_ray()) for _ in range(args.repeats)]
        equal["ray 1 node (1 CPU)"] = kept_rows(out) == reference["full"]
        ray.shutdown()
        cluster.start_worker()
        connect(cluster.address)
        runs["ray 2 nodes (1 CPU each)"] = [timed(on_ray()) for _ in range(args.repeats)]
        equal["ray 2 nodes (1 CPU each)"] = kept_rows(out) == reference["full"]
        runs["ray 2 nodes, dedup alone"] = [timed(on_ray(stages=DEDUP_ONLY)) for _ in range(args.repeats)]
        equal["ray 2 nodes, dedup alone"] = kept_rows(out) == reference["dedup"]
        # the generator's ids are s{shard}-d{n}; the kept rows carry source "gen{shard}" and n
        ours_dedup_ids = {f"s{m['source'][3:]}-d{m['n']}" for m in map(json.loads, kept_rows(out))}
        ray.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
    runs[f"ray embedded ({cores} CPUs, start+stop timed)"] = [timed(on_ray(workers=cores))
                                                             for _ in range(args.repeats)]
    equal[f"ray embedded ({cores} CPUs, start+stop timed)"] = kept_rows(out) == reference["full"]
    print(json.dumps({k: [round(r["seconds"], 2) for r in v] for k, v in runs.items()}), json.dumps(equal),
          file=sys.stderr, flush=True)
    if netns:
        netns.leave()
    dt = None
    if not args.skip_datatrove:
        dt = datatrove_dedup(os.path.dirname(shards[0]), os.path.join(args.work, "datatrove"), 2)
        runs["datatrove 4-stage MinHash dedup, 2 tasks"] = [dt]

    docs = runs["local 1 thread"][0]["documents"]
    print(f"corpus: {size / 1e6:.1f} MB, {docs} documents in {len(shards)} shards; {cores} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| run | median s | docs/s | MB/s | kept | equal to local | load1 before..after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    medians = {}
    for name, rs in runs.items():
        s = statistics.median(r["seconds"] for r in rs)
        medians[name] = s
        loads = ", ".join(f"{r['load1_before']:.1f}..{r['load1_after']:.1f}" for r in rs)
        eq = {True: "yes", False: "NO"}.get(equal.get(name), "-")
        print(f"| {name} | {s:.2f} | {docs / s:,.0f} | {size / s / 1e6:.1f} | {rs[0]['kept']} | {eq} | {loads} |")
    one, two = medians["ray 1 node (1 CPU)"], medians["ray 2 nodes (1 CPU each)"]
    print(f"ray 1 node / local 1 thread, time: {one / medians['local 1 thread']:.2f}")
    print(f"ray 2 nodes speed-up over 1 node: {one / two:.2f}x")
    if dt:
        print(f"dedup alone, ray 2 nodes / datatrove 2 tasks, documents/s: "
              f"{dt['seconds'] / medians['ray 2 nodes, dedup alone']:.1f}x; "
              f"local {cores} threads / datatrove: {dt['seconds'] / medians[f'local {cores} threads, dedup alone']:.1f}x")
        if ours_dedup_ids is not None:
            theirs = set(dt["kept_ids"])
            print(f"kept by datatrove only: {len(theirs - ours_dedup_ids)}, by luminamoon only: "
                  f"{len(ours_dedup_ids - theirs)}")
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump({"runs": {k: [{x: y for x, y in r.items() if x != "kept_ids"} for r in v]
                            for k, v in runs.items()}, "equal": equal, "bytes": size}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
