"""The FusedPipeline on Ray against the local executor, and datatrove's own
distributed MinHash deduplication, side by side in one run on the same files.

    .venv/bin/python bench/pipeline_ray.py --size-mb 100 [--repeats 3] [--corpus DIR]
        [--skip-datatrove] [--skip-embedded] [--datatrove-mb 4] [--stages]

Runs (on the corpus of bench/pipeline_bench.py's generator, or the *.jsonl[.gz]
shards of --corpus, e.g. bench/real_text_corpus.py's; NDJSON out), each pair
round-robin through bench/harness.py's measure_side_by_side (after one
warm-up call each), so that both sides meet the same load:
- local 1 thread against ray 1 node, then local with every core against ray
  2 nodes: a cluster of `ray start` nodes of one CPU each on this machine
  (tests/data/ray_cluster.py; inside a loopback-only network namespace when
  run as root), the driver joining it (--address), the cluster's start not
  timed; every Ray output is checked equal to its local anchor's;
- CPU seconds: the driver's process time, plus for Ray the CPU time of the
  cluster's processes (raylets, GCS, workers: the process trees of the `ray
  start` nodes, read from /proc) during the run;
- dedup alone (cleaner on, quality/exact/PII off): local and Ray 2 nodes, on
  the corpus and on a small one (--datatrove-mb) that datatrove's
  MinhashDedupSignature -> MinhashDedupBuckets -> MinhashDedupCluster ->
  MinhashDedupFilter (its LocalPipelineExecutor, two tasks, 8 bands x 8 rows
  of 5-grams as ours) finishes on; the documents each removes are compared;
- ray embedded: FusedPipeline.run(executor="ray", workers=cores), its own
  Ray instance started and stopped inside the timed run.
Prints a Markdown table (medians) and writes WORK/results.json. --stages instead
times one Ray run's stages (from its progress lines) once, after a warm-up, on 1
node or (--stages-nodes 2) on 2.
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


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds (user + system) of the processes under `roots` and of their
    children already reaped (cutime/cstime): a Ray node's raylet, GCS, workers."""
    tick = os.sysconf("SC_CLK_TCK")
    stats, children = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(name), int(fields[1])
        stats[pid] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, list(roots)
    while todo:
        pid = todo.pop()
        total += stats.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def with_cluster_cpu(fn, roots, cpu_log: list):
    """fn, recording the CPU seconds the cluster's processes spent during each call."""
    def call():
        before = tree_cpu_seconds(roots())
        result = fn()
        cpu_log.append(tree_cpu_seconds(roots()) - before)
        return result
    return call


def wait_alive_nodes(count: int, timeout: float = 120.0) -> None:
    """Until the GCS lists exactly `count` nodes alive. A SIGKILLed node stays listed alive, with its CPU,
    until its heartbeats are missed (~17 s here): a run before that sizes its partitions and places its
    tasks for a node that is gone."""
    import ray
    deadline = time.monotonic() + timeout
    while sum(1 for n in ray.nodes() if n.get("Alive")) != count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Ray cluster does not list {count} alive nodes after {timeout:.0f} s")
        time.sleep(0.5)


def stage_breakdown(run, shards: list, roots) -> None:
    """The Ray run's stages, from its progress lines: wall, driver CPU and
    cluster CPU seconds up to each line (after a warm-up run)."""
    marks: list = []
    def progress(message: str) -> None:
        marks.append((message, time.perf_counter(), time.process_time(), tree_cpu_seconds(roots())))
    go = run("ray stages", shards, ray_run=True, progress=progress)
    go()
    marks.clear()
    progress("start")
    start_us = time.time() * 1e6
    go()
    end_us = time.time() * 1e6
    progress("end (parts committed, summary written, _ray removed)")
    print("| up to | wall s | + wall s | driver CPU s | cluster CPU s | + cluster CPU s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    _, w0, c0, k0 = marks[0]
    prev_w, prev_k = w0, k0
    for message, w, c, k in marks[1:]:
        print(f"| {message} | {w - w0:.2f} | {w - prev_w:.2f} | {c - c0:.2f} | {k - k0:.2f} | {k - prev_k:.2f} |")
        prev_w, prev_k = w, k
    import ray
    timeline_summary(ray.timeline(), start_us, end_us)


def timeline_summary(events: list, start_us: float, end_us: float) -> None:
    """Ray's own per-task timeline (ray.timeline()) of one run, summed per
    event kind, and each worker's idle time inside the run's window: where a
    task's time goes (argument deserialization, execution, storing outputs)
    and how long the cluster's CPUs waited between tasks."""
    inside = [e for e in events if e.get("ph") == "X" and start_us <= e["ts"] and e["ts"] + e["dur"] <= end_us]
    kinds: dict = {}
    for e in inside:
        k = kinds.setdefault(e["name"], [0, 0.0])
        k[0] += 1
        k[1] += e["dur"] / 1e6
    print("| event (ray.timeline) | count | total s |")
    print("| --- | ---: | ---: |")
    for name, (count, total) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {count} | {total:.3f} |")
    busy: dict = {}
    for e in inside:
        if e["name"].startswith("luminamoon.") and e["tid"].startswith("worker"):  # a whole task
            task = e["name"].rsplit(".", 1)[-1].removesuffix("_task")
            busy.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], task))
    window = (end_us - start_us) / 1e6
    for (node, worker), spans in sorted(busy.items()):
        spans.sort()
        total = sum(b - a for a, b, _ in spans) / 1e6
        gaps = [(b[0] - a[1]) / 1e6 for a, b in zip(spans, spans[1:])]
        print(f"worker {worker[:20]} on {node}: {len(spans)} tasks, busy {total:.2f} s of the run's {window:.2f} s; "
              f"first task after {(spans[0][0] - start_us) / 1e6:.3f} s, gaps between tasks {sum(gaps):.3f} s "
              f"(largest {max(gaps, default=0):.3f} s), after the last {(end_us - spans[-1][1]) / 1e6:.3f} s")
        print("  " + ", ".join(f"{task} {(a - start_us) / 1e6:.2f}-{(b - start_us) / 1e6:.2f}" for a, b, task in spans))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "luminamoon-ray-bench"))
    ap.add_argument("--corpus", help="a directory of *.jsonl[.gz] shards to use instead of the generated corpus")
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--skip-embedded", action="store_true")
    ap.add_argument("--stages", action="store_true",
                    help="only one Ray run, once warm: wall and CPU seconds of each of its stages")
    ap.add_argument("--stages-nodes", type=int, choices=(1, 2), default=1,
                    help="with --stages: the cluster's nodes (one CPU each)")
    ap.add_argument("--clear-in-run", action="store_true",
                    help="time the removal of the previous repeat's output inside each run (the bench before "
                         "session 19); by default each timed run starts on an empty output directory")
    ap.add_argument("--datatrove-mb", type=int, default=4,
                    help="size of the generated corpus datatrove's dedup runs on (its stage 1 does ~35 docs/s a task)")
    args = ap.parse_args()
    # A HOME of our own: another Ray user's ~/.ray/auth_token would turn on token auth
    os.environ["HOME"] = os.path.join(args.work, "home")
    os.makedirs(os.environ["HOME"], exist_ok=True)
    import ray
    from harness import machine, measure_side_by_side
    from pipeline_bench import corpus
    from ray_cluster import Cluster, LoopbackNetns, connect
    from luminamoon.data import FusedPipeline

    os.makedirs(args.work, exist_ok=True)
    if args.corpus:
        shards = sorted(glob.glob(os.path.join(args.corpus, "*.jsonl")) + glob.glob(os.path.join(args.corpus, "*.jsonl.gz")))
    else:
        shards = corpus(os.path.join(args.work, "corpus"), args.size_mb)
    small = corpus(os.path.join(args.work, f"corpus-{args.datatrove_mb}mb"), args.datatrove_mb)
    size = sum(os.path.getsize(s) for s in shards)
    cores = os.cpu_count() or 1
    print(f"machine: {machine()}", file=sys.stderr, flush=True)
    try:
        netns = LoopbackNetns()
    except OSError as e:
        print(f"(no network namespace: {e}; Ray binds this machine's address)")
        netns = None
    timings: dict = {}
    cluster_cpu: dict = {}
    equal: dict = {}
    outs: dict = {}
    summaries: dict = {}

    def run(name: str, inputs: list, threads: int = 0, ray_run: bool = False, **stages):
        out = outs.setdefault(name, os.path.join(args.work, "out", str(len(outs))))

        progress = stages.pop("progress", None)

        def go():
            kw = dict(executor="ray", progress=progress) if ray_run else {}
            pipeline = FusedPipeline(format="ndjson", **(dict(num_threads=threads) if threads else {}), **stages)
            summaries[name] = pipeline.run(inputs, out, resume=False, **kw)
            return summaries[name]
        return go

    def side_by_side(fns: dict, ray_names: list, roots) -> None:
        logs = {n: [] for n in ray_names}
        wrapped = {n: with_cluster_cpu(f, roots, logs[n]) if n in logs else f for n, f in fns.items()}
        # Each timed run writes into an empty output directory, as a user's first run
        # does: removing the previous repeat's ~400 MB of parts took ~0.08 s of the
        # driver's time inside the run (its _clear_outputs), the same on 1 and 2 nodes.
        clear = None if args.clear_in_run else (lambda name: shutil.rmtree(outs[name], ignore_errors=True))
        timings.update(measure_side_by_side(wrapped, rounds=args.repeats, before=clear))
        for n, log in logs.items():
            cluster_cpu[n] = statistics.median(log[1:] or log)  # the warm-up call left out

    local1, local2 = "local, 1 thread", f"local, {cores} threads"
    ray1, ray2 = "ray, 1 node (1 CPU)", "ray, 2 nodes (1 CPU each)"
    dedup_local, dedup_ray = f"dedup alone: local, {cores} threads", "dedup alone: ray, 2 nodes"
    small_local, small_ray = (f"dedup alone, {args.datatrove_mb} MB: local, {cores} threads",
                              f"dedup alone, {args.datatrove_mb} MB: ray, 2 nodes")
    pairs = {ray1: local1, ray2: local2, dedup_ray: dedup_local, small_ray: small_local}
    cluster = Cluster(os.path.join(args.work, "cluster"))
    try:
        def roots():
            return [n.proc.pid for n in (cluster.head, cluster.worker) if n is not None]
        if not (args.stages and args.stages_nodes == 2):
            cluster.stop_worker()
        connect(cluster.address)
        wait_alive_nodes(1 if cluster.worker is None else 2)
        if args.stages:
            stage_breakdown(run, shards, roots)
            return 0
        # local and Ray round-robin in one run: the same load for both
        side_by_side({local1: run(local1, shards, 1), ray1: run(ray1, shards, ray_run=True)}, [ray1], roots)
        ray.shutdown()
        cluster.start_worker()
        connect(cluster.address)
        wait_alive_nodes(2)
        side_by_side({local2: run(local2, shards, cores), ray2: run(ray2, shards, ray_run=True)}, [ray2], roots)
        side_by_side({dedup_local: run(dedup_local, shards, cores, **DEDUP_ONLY),
                      dedup_ray: run(dedup_ray, shards, ray_run=True, **DEDUP_ONLY)}, [dedup_ray], roots)
        side_by_side({small_local: run(small_local, small, cores, **DEDUP_ONLY),
                      small_ray: run(small_ray, small, ray_run=True, **DEDUP_ONLY)}, [small_ray], roots)
        ray.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
    if not args.skip_embedded:
        emb = f"ray embedded ({cores} CPUs, start+stop timed)"
        pairs[emb] = local2
        timings.update(measure_side_by_side({emb: run(emb, shards, ray_run=True, workers=cores)},
                                            rounds=args.repeats, warmup=0))
    for name, anchor in pairs.items():
        if name in outs:
            equal[name] = kept_rows(outs[name]) == kept_rows(outs[anchor])
    if netns:
        netns.leave()
    dt = None
    if not args.skip_datatrove:
        dt = datatrove_dedup(os.path.dirname(small[0]), os.path.join(args.work, "datatrove"), 2)

    docs = summaries[local1]["documents_in"]
    print(f"corpus: {size / 1e6:.1f} MB, {docs} documents in {len(shards)} shards; {cores} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| run | median wall s | CPU s (driver + cluster) | docs/s | MB/s | kept | equal to local | walls |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for name, t in timings.items():
        n_docs = summaries[name]["documents_in"]
        n_bytes = summaries[name]["bytes_in"]
        cpu = f"{t.cpu_s:.2f}" + (f" + {cluster_cpu[name]:.2f}" if name in cluster_cpu else "")
        eq = {True: "yes", False: "NO"}.get(equal.get(name), "-")
        walls = ", ".join(f"{w:.2f}" for w in t.samples)
        print(f"| {name} | {t.wall_s:.2f} | {cpu} | {n_docs / t.wall_s:,.0f} | {n_bytes / t.wall_s / 1e6:.1f} "
              f"| {summaries[name]['documents_kept']} | {eq} | {walls} |")
    one, two = timings[ray1].wall_s, timings[ray2].wall_s
    cpu1 = timings[ray1].cpu_s + cluster_cpu[ray1]
    cpu2 = timings[ray2].cpu_s + cluster_cpu[ray2]
    print(f"ray 1 node / local 1 thread: wall {one / timings[local1].wall_s:.2f}, "
          f"CPU {cpu1 / timings[local1].cpu_s:.2f}")
    print(f"ray 2 nodes speed-up over 1 node: wall {one / two:.2f}x; CPU-seconds 2 nodes / 1 node {cpu2 / cpu1:.2f}")
    result = {"machine": machine(), "bytes": size, "equal": equal,
              "runs": {k: {"wall_s": t.wall_s, "cpu_s_driver": t.cpu_s, "cpu_s_cluster": cluster_cpu.get(k),
                           "walls": t.samples, "documents": summaries[k]["documents_in"],
                           "kept": summaries[k]["documents_kept"]} for k, t in timings.items()}}
    if dt:
        small_docs = summaries[small_local]["documents_in"]
        print(f"| datatrove 4-stage MinHash dedup, 2 tasks, {args.datatrove_mb} MB | {dt['seconds']:.2f} | - "
              f"| {small_docs / dt['seconds']:,.0f} | - | {dt['kept']} | - | one run |")
        for name in (small_local, small_ray):
            print(f"{name} / datatrove, documents/s: {dt['seconds'] / timings[name].wall_s:.0f}x")
        all_ids = set()
        for path in small:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        all_ids.add(json.loads(line)["id"])
                    except ValueError:
                        pass  # the generator's malformed lines: neither side reads them
        ours_kept = {f"s{m['source'][3:]}-d{m['n']}" for m in map(json.loads, kept_rows(outs[small_local]))}
        theirs_kept = set(dt["kept_ids"])
        ours_removed, theirs_removed = all_ids - ours_kept, all_ids - theirs_kept
        print(f"documents read {len(all_ids)}; removed by ours {len(ours_removed)}, by datatrove "
              f"{len(theirs_removed)}; by both {len(ours_removed & theirs_removed)}, by datatrove only "
              f"{len(theirs_removed - ours_removed)}, by ours only {len(ours_removed - theirs_removed)}")
        result["datatrove"] = {"seconds": dt["seconds"], "kept": dt["kept"], "documents": len(all_ids),
                               "removed_ours": len(ours_removed), "removed_datatrove": len(theirs_removed),
                               "removed_both": len(ours_removed & theirs_removed),
                               "only_ours": sorted(ours_removed - theirs_removed)[:200],
                               "only_datatrove": sorted(theirs_removed - ours_removed)[:200]}
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
