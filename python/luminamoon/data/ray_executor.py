"""The FusedPipeline on a Ray cluster, with the local run's exact result.

``run_on_ray(config, inputs, output_dir)`` (``FusedPipeline.run(...,
executor="ray")``, ``luminamoon data run --executor ray``) runs five stages
(docs/ray.md explains the design):

1. map, one task per shard (C++ ``ShardTasks.map_shard``): read, clean,
   quality; exact keys, MinHash signatures and band keys of the survivors;
   the batches as cleaner and quality left them are saved for the finish.
   Exact-key and band-key rows leave the task split by key range, as Ray
   objects: that is the shuffle (tasks over the object store). The
   signatures and the saved batches are Ray objects too (nothing is written
   to disk by a map).
2. exact reduce, one task per key range: first occurrence per key.
3. band reduce, one task per key range, beside the exact reduce: the rows
   of buckets of >= 2 documents; the driver's edges join their survivors.
4. near resolution: components of the edges (driver); per node, a task
   picks the candidates' rows from the signatures its maps left there; then
   one task per group of components replays them through the native
   MinHashLSH.
5. finish, one task per shard (C++ ``ShardTasks.finish_shard``), on its
   map's node, taking the resolvers' decisions as object refs: from the
   map's saved batches (the shard is read and cleaned once), the decided
   drops, PII, write the shard's parts (without a dedup stage there is no
   map: the finish reads, cleans and filters the shard itself).
Then the driver renames the parts into one sequence and writes summary.json.

Every reduction's and finish's result is also a file under ``OUTPUT/_ray``
written under a temporary name and renamed when complete, so a retried task
(a killed worker or node) redoes or reuses it, and a restarted driver
(``resume=True``) continues from the completed stages and shards. A map's
outputs live only in the object store (Note [map outputs in the object
store]): a lost one is rebuilt by Ray from lineage (the map runs again). OUTPUT
must be on a file system every node sees (as the finished parts must be).

Note [map outputs in the object store]
Until session 4 the map wrote its saved batches (about the corpus's size)
and signatures (512 B a document) to OUTPUT/_ray, fsynced, and the finish
read them back: on one node that was most of what separated the Ray run
from the local one (docs/benchmarks.md, issue 17 (session 4)). As task
returns they are one copy into the node's shared-memory store (spilled to
disk by Ray only when it is full), read in place by the finish and the
resolvers, and freed when the last task holding them is done. A map is
deterministic, so lineage reconstruction gives the same bytes.
"""
from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import sys
import time
import uuid
from typing import Any, Callable, Optional

import numpy as np

from . import global_dedup as gd
from .pipeline import DataError, PipelineConfig, _backend, resolve_inputs

__all__ = ["run_on_ray", "RAY_STATE_DIR"]

RAY_STATE_DIR = "_ray"
_FORMAT_EXT = {"parquet": ".parquet", "arrow": ".arrow", "arrow_stream": ".arrows", "ndjson": ".ndjson"}


# ---------------------------------------------------------------- faults
def _crash_point(name: str) -> None:
    """Fault injection for the tests (as crash_point() in the C++ pipeline):
    SIGKILLs this process (a Ray worker or the driver) at the point named by
    LUMINAMOON_RAY_CRASH_AT, once: the first process to create the file
    LUMINAMOON_RAY_CRASH_ONCE dies, later attempts run through."""
    if os.environ.get("LUMINAMOON_RAY_CRASH_AT") != name:
        return
    once = os.environ.get("LUMINAMOON_RAY_CRASH_ONCE")
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    import signal
    os.kill(os.getpid(), signal.SIGKILL)


# ---------------------------------------------------------------- files
def _atomic_npz(path: str, **arrays: np.ndarray) -> None:
    tmp = f"{path}.tmp-{uuid.uuid4().hex}.npz"
    np.savez(tmp, **arrays)
    _fsync(tmp)
    os.replace(tmp, path)


def _atomic_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load(path: str) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


class _Layout:
    """Where each stage keeps its results under OUTPUT/_ray."""

    def __init__(self, output_dir: str) -> None:
        self.out = output_dir
        self.root = os.path.join(output_dir, RAY_STATE_DIR)

    def dir(self, stage: str) -> str:
        path = os.path.join(self.root, stage)
        os.makedirs(path, exist_ok=True)
        return path

    def reduced(self, stage: str, p: int) -> str:
        return os.path.join(self.dir(stage), f"part-{p:06d}.npz")

    def finished(self, s: int) -> str:
        return os.path.join(self.dir("finish"), f"shard-{s:06d}")


# ---------------------------------------------------------------- task bodies
# Plain functions (wrapped as Ray tasks in run_on_ray), so that tests can call them too.
_TASK_CPUS = 1  # what every task asks Ray for


def _as_task(fn: Callable) -> Callable:
    """fn as a Ray task body. Note [threads in a task]: a task holds one Ray
    CPU, but the data engine's parallel stages (cleaner, PII, MinHash) open
    oneTBB arenas of every core of the node unless told otherwise; with one
    task per CPU that is one busy thread per core per task, whose spinning and
    cache sharing cost CPU seconds (and wall time) without speeding anything
    up. So a task's stages use the task's CPUs (LUMINAMOON_NUM_THREADS, read
    by both native modules; a value the user set for the workers stands).
    The worker's allocator keeps what a task frees for the next one (Note
    [freed memory kept] in src/data/pipeline/freed_memory.cc), unless
    LUMINAMOON_KEEP_FREED_MEMORY=0."""
    @functools.wraps(fn)
    def task(*args):
        os.environ.setdefault("LUMINAMOON_NUM_THREADS", str(_TASK_CPUS))
        _keep_freed_memory()
        return fn(*args)
    return task


_KEPT_FREED_BYTES = 1 << 30
_freed_memory_kept = False


def _keep_freed_memory() -> None:
    """Once per worker process: blocks up to 1 GiB from the heap, and up to
    1 GiB of free heap kept (at most what the worker held at its peak)."""
    global _freed_memory_kept
    if not _freed_memory_kept and os.environ.get("LUMINAMOON_KEEP_FREED_MEMORY", "1") != "0":
        _backend().keep_freed_memory(_KEPT_FREED_BYTES)
        _freed_memory_kept = True


_last_tasks: Optional[tuple] = None  # (key, ShardTasks) of this worker process's last task

# Note [remote functions made once]: ray.remote(...) makes a new remote
# function, which Ray pickles and exports to the GCS at its first .remote()
# call. Made afresh in every run, the six task kinds' submissions took 0.036
# s of a 2-node run's driver (cProfile, the generated 415 MB corpus), 0.016 s
# of it submitting the finishes, between the last map and the first finish,
# where nothing else runs; made once, 0.012 and 0.004 s. So a process makes
# each (task, returns) once and every later run reuses it (Ray exports it
# again by itself in a new job).
_remote_functions: dict = {}


def _remote(ray, fn: Callable, num_returns: int = 1):
    """fn as a Ray task of _TASK_CPUS CPUs, retried on worker failure."""
    key = (fn.__name__, num_returns)
    if key not in _remote_functions:
        _remote_functions[key] = ray.remote(num_cpus=_TASK_CPUS, num_returns=num_returns, max_retries=5,
                                            retry_exceptions=False)(_as_task(fn))
    return _remote_functions[key]


def _tasks(native_config: dict, shards: list[str]):
    """The ShardTasks of this run, kept across the tasks a worker process
    runs (its PII stage compiles its patterns once, not once per shard)."""
    global _last_tasks
    config = dict(native_config)
    if not config.get("num_threads"):
        config["num_threads"] = _TASK_CPUS  # Note [threads in a task] (results do not depend on it)
    key = (json.dumps(config, sort_keys=True, default=str), tuple(shards))
    if _last_tasks is None or _last_tasks[0] != key:
        _last_tasks = (key, _backend()._ShardTasks(config, shards))
    return _last_tasks[1]


def map_task(native_config: dict, shards: list[str], s: int, partitions: int) -> list:
    """Survivors of shard s, split into exact rows and band rows per
    partition (2 * partitions objects), then (refs, signatures) for the
    resolvers, the shard's saved batches for its finish (Note [map outputs in
    the object store]) and the survivor count."""
    m = _tasks(native_config, shards).map_shard(s, save_batches=True)
    _crash_point(f"map:{s}")
    refs = np.asarray(m["refs"], dtype=np.int64)
    keys = np.asarray(m["exact_keys"], dtype=np.uint64)
    bands = int(native_config["minhash_bands"])
    sigs = np.asarray(m["signatures"], dtype=np.uint64).reshape(refs.size, -1) if refs.size else \
        np.empty((0, int(native_config["minhash_num_perm"])), dtype=np.uint64)
    if keys.size:
        exact = gd.split_rows(gd.key_partition(keys, partitions), partitions, keys, refs)
    else:
        exact = [(keys, refs[:0])] * partitions
    band_keys = np.asarray(m["band_keys"], dtype=np.uint64)
    if band_keys.size:
        band, bkeys, brefs = gd.band_rows(band_keys.reshape(-1, bands), refs, bands)
        banded = gd.split_rows(gd.key_partition(bkeys, partitions), partitions, band, bkeys, brefs)
    else:
        empty = (np.empty(0, np.int16), np.empty(0, np.uint64), np.empty(0, np.int64))
        banded = [empty] * partitions
    return list(exact) + list(banded) + [(refs, sigs), m["batches"], int(refs.size)]


def exact_reduce_task(output_dir: str, p: int, *rows: tuple) -> tuple[np.ndarray, np.ndarray]:
    path = _Layout(output_dir).reduced("exact", p)
    if not os.path.exists(path):
        keys, refs = gd.concat(rows, 2)
        dropped, matched = gd.exact_decisions(keys, refs)
        _crash_point(f"exact_reduce:{p}")
        _atomic_npz(path, dropped=dropped, matched=matched)
    d = _load(path)
    return d["dropped"], d["matched"]


def band_reduce_task(output_dir: str, p: int, *rows: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, ref) rows of the buckets of >= 2 documents in key range p;
    it needs no exact decision, so it runs beside the exact reduce."""
    path = _Layout(output_dir).reduced("buckets", p)
    if not os.path.exists(path):
        band, keys, refs = gd.concat(rows, 3)
        bucket, members = gd.bucket_members(band, keys, refs)
        _crash_point(f"band_reduce:{p}")
        _atomic_npz(path, bucket=bucket, refs=members)
    d = _load(path)
    return d["bucket"], d["refs"]


def signature_rows_task(partitions: int, wanted: list, owner: list, *refs_and_signatures: tuple) -> Any:
    """The signatures of the candidate documents of the shards whose maps ran
    on this task's node: per shard, its `wanted` refs (sorted) and their
    resolvers (`owner`); then one (refs, signatures) per resolver. It runs
    where those maps left their signatures, so that only these rows cross
    nodes: a resolver given whole shards' signatures waited ~0.1 s of 0.3 s
    between the maps and the finishes for them (docs/benchmarks.md, issue 17,
    session 16), and one task per shard rather than per node cost ~0.02 s of
    dispatch (session 27)."""
    picked = [sigs[np.searchsorted(shard_refs, w)] for (shard_refs, sigs), w in zip(refs_and_signatures, wanted)]
    parts = gd.split_rows(np.concatenate(owner).astype(np.int64), partitions,
                          np.concatenate(wanted).astype(np.int64), np.concatenate(picked))
    return parts if partitions > 1 else parts[0]  # one return is the value itself, not a list


def resolve_task(native_config: dict, output_dir: str, p: int, shards: int, *picked: tuple) -> list:
    """Near decisions of the components assigned to resolver p, from the
    (refs, signatures) of their documents, one tuple per picker: the
    (dropped, matched) refs of each of the run's `shards` shards, then their
    count (Note [decisions as object refs])."""
    path = _Layout(output_dir).reduced("near", p)
    if not os.path.exists(path):
        num_perm = int(native_config["minhash_num_perm"])
        refs = np.concatenate([np.empty(0, np.int64)] + [r for r, _ in picked])
        sigs = np.concatenate([np.empty((0, num_perm), np.uint64)] + [g for _, g in picked])
        order = np.argsort(refs, kind="stable")
        c = native_config
        dropped, matched = gd.near_decisions(
            refs[order], sigs[order], num_perm=c["minhash_num_perm"], bands=c["minhash_bands"],
            rows=c["minhash_rows"], ngram=c["minhash_ngram"], threshold=c["minhash_threshold"],
            seed=c["minhash_seed"], scheme=c["minhash_scheme"])
        _crash_point(f"resolve:{p}")
        _atomic_npz(path, dropped=dropped, matched=matched)
    d = _load(path)
    return gd.split_rows(gd.ref_shard(d["dropped"]), shards, d["dropped"], d["matched"]) + [int(d["dropped"].size)]


def finish_task(native_config: dict, shards: list[str], s: int, output_dir: str,
                refs: np.ndarray, near: np.ndarray, matched: np.ndarray,
                batches: Optional[np.ndarray] = None, *resolved: tuple) -> str:
    """Shard s's parts in OUTPUT/_ray/finish/shard-s (renamed there when
    complete), from the map's saved batches (None: the shard is read again
    through cleaner and quality); returns its totals (JSON). Its drops are
    (refs, near, matched), exact duplicates, then each resolver's (dropped,
    matched) of shard s, near duplicates, in resolver order (Note [decisions
    as object refs])."""
    layout = _Layout(output_dir)
    final = layout.finished(s)
    if not os.path.exists(os.path.join(final, "totals.json")):
        if resolved:
            refs = np.concatenate([refs] + [d for d, _ in resolved])
            near = np.concatenate([near] + [np.ones(d.size, np.uint8) for d, _ in resolved])
            matched = np.concatenate([matched] + [m for _, m in resolved])
        tmp = f"{final}.tmp-{uuid.uuid4().hex}"
        totals = _tasks(native_config, shards).finish_shard(
            s, tmp, np.ascontiguousarray(refs, dtype=np.int64), np.ascontiguousarray(near, dtype=np.uint8),
            np.ascontiguousarray(matched, dtype=np.int64), batches)
        _crash_point(f"finish:{s}")
        _atomic_text(os.path.join(tmp, "totals.json"), totals)
        try:
            os.rename(tmp, final)
        except OSError:  # another attempt finished first: its identical result stands
            shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(final, "totals.json"), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- driver
# Note [spread tasks]: Ray's default placement leases a task's worker from
# the driver's own node while that node looks free, and a raylet's view of
# the other nodes lags (it learns their load through the GCS). With all maps
# submitted at once, the head node's worker took 6 of the 8 maps of a 2-node
# run and the other node sat idle 1.4 s of its 3.0 s (ray.timeline, issue
# 17, session 15); the finishes, placed where their saved batches are, then
# followed the same split. Ray's "SPREAD" strategy fixed it on a quiet
# machine but not under load, where a lagging view sent all 6 maps of the
# test to one node. So maps and reductions are placed by the driver: task i
# goes to the i-th of the cluster's CPU slots, taken round-robin over the
# alive nodes (a node of c CPUs holds c slots), with soft node affinity, so
# that a task whose node died runs elsewhere. A shard's finish goes to its
# map's slot, the node holding the shard's saved batches. (Ray's
# locality-aware default did that while the finishes were submitted after
# the near decisions; submitted before them (Note [decisions as object
# refs]), some ran on the other node and pulled their ~50 MB of batches:
# 0.26-0.41 s against 0.11 s, session 27.)
def _placements(ray) -> list:
    """Scheduling strategies of the cluster's CPU slots, round-robin over its alive nodes."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    cpus = {n["NodeID"]: int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")}
    nodes = sorted(node for node, c in cpus.items() if c > 0)
    slots = [node for r in range(max(cpus.values(), default=0)) for node in nodes if cpus[node] > r]
    return [NodeAffinitySchedulingStrategy(node_id=node, soft=True) for node in slots] or ["DEFAULT"]


def _first_error(errors: dict[int, BaseException], what: str) -> BaseException:
    """The error the local run would meet first: that of the earliest shard."""
    s = min(errors)
    e = errors[s]
    cause = getattr(e, "cause", None)
    if isinstance(cause, DataError):
        return cause
    if isinstance(e, DataError):
        return DataError(str(e), getattr(e, "exit_code", 1))
    return RuntimeError(f"{what} {s} failed on Ray: {cause or e}")


def _gather(ray, refs: dict[int, Any], what: str, on_done: Callable[[int], None]) -> dict[int, Any]:
    """ray.get of every ref, as they finish; errors are raised once all are in."""
    pending = {r: k for k, r in refs.items()}
    results: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for r in done:
            k = pending.pop(r)
            try:
                results[k] = ray.get(r)
            except Exception as e:  # noqa: BLE001 (a task's error, judged below)
                errors[k] = e
            on_done(len(results) + len(errors))
    if errors:
        raise _first_error(errors, what)
    return results


def _clear_outputs(output_dir: str) -> None:
    """What an earlier run (local or Ray) left in the output directory."""
    for name in os.listdir(output_dir):
        path = os.path.join(output_dir, name)
        if name in (RAY_STATE_DIR, "_state", "dropped", "metrics"):
            shutil.rmtree(path, ignore_errors=True)
        elif name == "summary.json" or (name.startswith("part-") and os.path.isfile(path)):
            os.remove(path)


def _commit_parts(layout: _Layout, totals: list[dict], fmt: str) -> None:
    """Renames every shard's parts, in shard order, into OUTPUT/part-N; a rerun
    after a crash part-way skips the renames already done."""
    ext = _FORMAT_EXT[fmt]
    base = 0
    for s, t in enumerate(totals):
        src_dir = layout.finished(s)
        for k in range(int(t["parts"])):
            name, target = f"part-{k:08d}{ext}", f"part-{base + k:08d}{ext}"
            for sub in ("", "dropped", "metrics"):
                src = os.path.join(src_dir, sub, name)
                dst_dir = os.path.join(layout.out, sub)
                if os.path.exists(src):
                    os.makedirs(dst_dir, exist_ok=True)
                    os.replace(src, os.path.join(dst_dir, target))
                    _crash_point("driver:commit")
        base += int(t["parts"])
    for d in (layout.out, os.path.join(layout.out, "dropped"), os.path.join(layout.out, "metrics")):
        if os.path.isdir(d):
            _fsync(d)


def _log(progress: Optional[Callable[[str], None]], message: str) -> None:
    if progress is not None:
        progress(message)


def run_on_ray(config: PipelineConfig, inputs: Any, output_dir: Any, resume: bool = True,
               address: Optional[str] = None, workers: Optional[int] = None,
               progress: Optional[Callable[[str], None]] = None) -> dict:
    """Runs the pipeline on Ray; returns summary.json's content. address None
    starts a local Ray instance (with `workers` CPUs, default all) for the run;
    otherwise joins that cluster (or the one already initialized in this process)."""
    try:
        import ray
    except ImportError:
        raise DataError("--executor ray needs Ray (pip install 'ray==2.60.0')", 7) from None
    started = time.monotonic()
    output_dir = os.path.abspath(os.fspath(output_dir))
    shards = resolve_inputs(inputs)
    native_config = config.to_native()
    tasks = _backend()._ShardTasks(native_config, shards)
    tasks.preflight(output_dir)

    os.makedirs(output_dir, exist_ok=True)
    lock_path = os.path.join(output_dir, ".luminamoon.lock")
    lock = open(lock_path, "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise DataError(f"another run is writing to {output_dir} ({lock_path} is locked)", 6) from None

    own_ray = False
    try:
        layout = _Layout(output_dir)
        manifest_path = os.path.join(layout.root, "manifest.json")
        resumed = resume and os.path.exists(manifest_path)
        if resumed:
            with open(manifest_path, encoding="utf-8") as f:
                state = json.load(f)
            tasks.check_manifest(state["manifest"])
            partitions = int(state["partitions"])
        else:
            _clear_outputs(output_dir)
        if not ray.is_initialized():
            kwargs: dict = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
            if address:
                ray.init(address=address, **kwargs)
            else:
                # "local": a new instance even where another cluster runs on this machine
                ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, **kwargs)
            own_ray = True
        if not resumed:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            partitions = max(1, min(workers or cpus, 64))
            os.makedirs(layout.root, exist_ok=True)
            _atomic_text(manifest_path, json.dumps({"manifest": tasks.manifest(), "partitions": partitions}))
        summary_path = os.path.join(layout.root, "summary.json")
        if os.path.exists(summary_path):  # finished before: nothing left to do
            with open(summary_path, encoding="utf-8") as f:
                totals_json = json.load(f)["shards"]
            text = tasks.summary(totals_json, [0] * len(shards), True, time.monotonic() - started)
            _atomic_text(os.path.join(output_dir, "summary.json"), text + "\n")
            return json.loads(text)
        summary = _run_stages(ray, native_config, shards, layout, partitions, progress)
        totals_json = summary["shards"]
        _commit_parts(layout, [json.loads(t) for t in totals_json], config.format)
        _atomic_text(summary_path, json.dumps({"shards": totals_json}))
        text = tasks.summary(totals_json, summary["session"], resumed, time.monotonic() - started)
        _atomic_text(os.path.join(output_dir, "summary.json"), text + "\n")
        for stage in ("exact", "buckets", "near", "finish"):
            shutil.rmtree(os.path.join(layout.root, stage), ignore_errors=True)
        return json.loads(text)
    finally:
        if own_ray:
            ray.shutdown()
        lock.close()


def _run_stages(ray, native_config: dict, shards: list[str], layout: _Layout, partitions: int,
                progress: Optional[Callable[[str], None]]) -> dict:
    out = layout.out
    n = len(shards)
    finished = [os.path.exists(os.path.join(layout.finished(s), "totals.json")) for s in range(n)]
    dedup, minhash = native_config["dedup"], native_config["minhash"]
    drops: dict[int, tuple] = {}  # exact duplicates per shard
    # per resolver: its (dropped, matched) of each shard, then its count (Ray objects, or read from disk)
    resolved: list = []
    candidates = 0
    maps: dict[int, list] = {}
    place = _placements(ray)  # Note [spread tasks]
    if not all(finished) and (dedup or minhash):
        have = lambda stage: all(os.path.exists(layout.reduced(stage, p)) for p in range(partitions))  # noqa: E731
        # Note [map outputs in the object store]: a map's rows, signatures and
        # saved batches exist only as Ray objects, so a resumed driver maps
        # again unless every reduction it needs is on disk (then the finish
        # reads its shard again instead of continuing from saved batches).
        if not (have("exact") and have("buckets") and (not minhash or have("near"))):
            mapper = _remote(ray, map_task, 2 * partitions + 3)
            config_ref, shards_ref = ray.put(native_config), ray.put(shards)
            maps = {s: mapper.options(scheduling_strategy=place[s % len(place)]).remote(
                config_ref, shards_ref, s, partitions) for s in range(n)}
        # The exact and the band reduce need only the maps' rows: both are
        # submitted with the maps, before anything is waited for, and run side
        # by side as their rows come.
        exact_refs = bucket_refs = None
        if dedup and not have("exact"):
            reducer = _remote(ray, exact_reduce_task, 2)
            exact_refs = {p: reducer.options(scheduling_strategy=place[p % len(place)]).remote(
                out, p, *[maps[s][p] for s in range(n)]) for p in range(partitions)}
        if minhash and not have("buckets"):
            band_reducer = _remote(ray, band_reduce_task)
            bucket_refs = {p: band_reducer.options(scheduling_strategy=place[(p + partitions) % len(place)]).remote(
                out, p, *[maps[s][partitions + p] for s in range(n)]) for p in range(partitions)}
        if maps:  # the progress of the maps; the reducers start as their inputs come
            _gather(ray, {s: r[-1] for s, r in maps.items()}, "map of shard",
                    lambda k: _log(progress, f"map {k}/{n} shards"))
        exact_dropped = exact_matched = np.empty(0, np.int64)
        if dedup:
            if exact_refs is None:
                results = {p: exact_reduce_task(out, p) for p in range(partitions)}
            else:
                results = {p: (ray.get(a), ray.get(b)) for p, (a, b) in exact_refs.items()}
            exact_dropped = np.concatenate([results[p][0] for p in range(partitions)])
            exact_matched = np.concatenate([results[p][1] for p in range(partitions)])
            _log(progress, f"exact duplicates {exact_dropped.size}")
        if minhash:
            if bucket_refs is None:
                buckets = [band_reduce_task(out, p) for p in range(partitions)]
            else:
                buckets = [v for _, v in sorted(_gather(ray, bucket_refs, "band reduce", lambda k: None).items())]
            a, b = gd.candidate_edges(np.concatenate([k for k, _ in buckets]), np.concatenate([r for _, r in buckets]),
                                      exact_dropped)
            nodes, labels = gd.components(a, b)
            candidates = nodes.size
            if have("near"):
                resolved = [resolve_task(native_config, out, p, n) for p in range(partitions)]
            else:
                owner = gd.component_partition(labels, partitions)
                picker = _remote(ray, signature_rows_task, partitions)
                picked: dict[int, list] = {p: [] for p in range(partitions)}
                # the candidates by shard, in one pass (still in ref order within a shard), then
                # by the node its map was placed on: one picker a node
                by_node: dict[Any, list] = {}
                for s, (wanted, owners) in enumerate(gd.split_rows(gd.ref_shard(nodes), n, nodes, owner)):
                    if wanted.size:
                        by_node.setdefault(getattr(place[s % len(place)], "node_id", None), []).append(
                            (s, wanted, owners))
                for rows_of in by_node.values():
                    where = place[rows_of[0][0] % len(place)]
                    rows = picker.options(scheduling_strategy=where).remote(
                        partitions, [w for _, w, _ in rows_of], [o for _, _, o in rows_of],
                        *[maps[s][2 * partitions] for s, _, _ in rows_of])
                    for p, r in enumerate(rows if partitions > 1 else [rows]):
                        picked[p].append(r)
                resolver = _remote(ray, resolve_task, n + 1)
                config_ref = ray.put(native_config)
                resolved = [resolver.options(scheduling_strategy=place[p % len(place)]).remote(
                    config_ref, out, p, n, *picked[p]) for p in range(partitions)]
        for s, (r, m) in enumerate(gd.split_rows(gd.ref_shard(exact_dropped), n, exact_dropped, exact_matched)):
            drops[s] = (r, np.zeros(r.size, np.uint8), m)
    empty = (np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, np.int64))
    finisher = _remote(ray, finish_task)
    config_ref, shards_ref = ray.put(native_config), ray.put(shards)
    # Note [decisions as object refs]: the finishes are submitted before the
    # near decisions exist and take the resolvers' outputs as arguments; Ray
    # starts each once they are in. The driver waiting for them, splitting
    # them by shard and only then submitting the finishes cost a round trip
    # between the stages (~0.02-0.04 s of the 2-node run's serial middle,
    # docs/benchmarks.md, issue 17, session 27). A resolver returns its
    # decisions split by shard, one object each, so that a finish reads its
    # own rows only: 4,000 finishes each reading every resolver's whole output
    # would move the decisions 4,000 times (docs/ray.md, "Scale on paper").
    refs = {s: finisher.options(scheduling_strategy=place[s % len(place)]).remote(
        config_ref, shards_ref, s, out, *drops.get(s, empty), maps[s][2 * partitions + 1] if s in maps else None,
        *[r[s] for r in resolved]) for s in range(n)}
    maps.clear()  # a shard's saved batches are freed once its finish is done with them
    if resolved:  # a resolver's error is raised as such, before the finishes that wait for it
        counts = {p: r[n] for p, r in enumerate(resolved)}  # each resolver's last return
        if isinstance(counts[0], ray.ObjectRef):
            counts = _gather(ray, counts, "near-duplicate resolution", lambda k: None)
        _log(progress, f"candidate documents {candidates}, near duplicates {sum(counts.values())}")

    def finished_one(k: int) -> None:
        _log(progress, f"finish {k}/{n} shards")
        _crash_point(f"driver:finish:{k}")

    totals = _gather(ray, refs, "finish of shard", finished_one)
    return {"shards": [totals[s] for s in range(n)], "session": [0 if finished[s] else 1 for s in range(n)]}


def print_progress(message: str) -> None:
    sys.stderr.write(f"luminamoon data [ray]: {message}\n")
    sys.stderr.flush()
