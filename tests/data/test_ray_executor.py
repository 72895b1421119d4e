"""The FusedPipeline on a real two-node Ray cluster (one CPU per node, inside
a loopback-only network namespace) gives exactly the local run's result:
documents, order, drop reasons, matched ids, summary counts; also when a
worker is SIGKILLed during the map or the shuffle, when the second node is
stopped mid-run, and when the driver is SIGKILLed and the run resumed.

The reference is the local executor (FusedPipeline.run), read back through
an independent reader (json for NDJSON parts, pyarrow for Parquet)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

ray = pytest.importorskip("ray")

from luminamoon.data import DataError, FusedPipeline  # noqa: E402
from luminamoon.data.cli import generate_corpus  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from ray_cluster import Cluster, LoopbackNetns, connect, interfaces  # noqa: E402

CONFIG = dict(format="ndjson", write_dropped=True, part_rows=150, batch_docs=64)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        netns = LoopbackNetns()
    except (OSError, FileNotFoundError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no network namespace for the Ray tests: {e}")
    try:
        assert interfaces() == ["lo"], f"the namespace must hold only loopback, has {interfaces()}"
        c = Cluster(str(tmp_path_factory.mktemp("raycluster")))
        try:
            yield c
        finally:
            if ray.is_initialized():
                ray.shutdown()
            c.stop()
    finally:
        netns.leave()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Six shards with exact and near duplicates planted across shards (the
    generator draws them from every earlier shard), PII, junk and malformed lines."""
    d = tmp_path_factory.mktemp("corpus")
    return generate_corpus(str(d), shards=6, docs_per_shard=220, seed=11)


def read_run(out: str) -> dict:
    def rows(pattern: str) -> list:
        found = []
        for path in sorted(glob.glob(os.path.join(out, pattern))):
            with open(path, encoding="utf-8") as f:
                found.extend(json.loads(line) for line in f if line.strip())
        return found

    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    for volatile in ("this_run", "parts", "bytes_out"):  # part files may be cut differently
        summary.pop(volatile)
    return {"kept": rows("part-*.ndjson"), "dropped": rows("dropped/part-*.ndjson"), "summary": summary}


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("local") / "out")
    FusedPipeline(**CONFIG).run(corpus, out, resume=False)
    result = read_run(out)
    reasons = {(d["stage"], d["reason"]) for d in result["dropped"]}
    # The corpus exercises every rule the distributed run must reproduce.
    assert {("dedup", "exact_duplicate"), ("minhash", "near_duplicate"), ("reader", "malformed")} <= reasons
    names = [os.path.basename(p) for p in corpus]

    def crosses(d: dict) -> bool:
        return d["detail"].split(":")[0] != os.path.basename(d["shard"]) and d["detail"].split(":")[0] in names

    assert any(crosses(d) for d in result["dropped"] if d["reason"] == "exact_duplicate")
    assert any(crosses(d) for d in result["dropped"] if d["reason"] == "near_duplicate")
    assert result["summary"]["counters"], "PII was masked"
    return result


@pytest.fixture
def driver(cluster):
    """This process as a driver of the cluster; env: variables for its workers."""
    def join(**env):
        if ray.is_initialized():
            ray.shutdown()
        connect(cluster.address, runtime_env={"env_vars": env} if env else None)
    yield join
    if ray.is_initialized():
        ray.shutdown()


def run_ray(corpus, out, **kwargs) -> dict:
    FusedPipeline(**CONFIG).run(corpus, out, executor="ray", resume=False, **kwargs)
    return read_run(out)


def assert_same(result: dict, local: dict) -> None:
    assert len(result["kept"]) == len(local["kept"])
    assert result["kept"] == local["kept"]
    assert result["dropped"] == local["dropped"]
    assert result["summary"] == local["summary"]


def test_two_node_run_equals_local(cluster, driver, corpus, local, tmp_path):
    driver()
    assert cluster.alive_nodes() == 2
    result = run_ray(corpus, str(tmp_path / "out"))
    assert_same(result, local)
    assert not os.path.exists(tmp_path / "out" / "_ray" / "map"), "intermediates are removed at the end"


def test_maps_are_spread_over_the_nodes(cluster, driver, corpus, local, tmp_path):
    """Note [spread tasks]: each node maps its share of the shards. Before it,
    the driver's node took most maps while the other node's CPU waited. The
    finishes are spread the same way (each is placed on its map's slot; that
    it runs beside its saved batches shows in time only, docs/benchmarks.md
    row Y2k)."""
    driver()
    assert cluster.alive_nodes() == 2
    start_us = time.time() * 1e6
    assert_same(run_ray(corpus, str(tmp_path / "out")), local)
    # A worker's node, told by its object store; task events reach the GCS within a second or so.
    node_of = {w: info["plasma_store_socket"] for w, info in ray._private.state.state.workers().items()}
    deadline = time.monotonic() + 30
    def tasks(kind: str) -> list:
        return [e for e in ray.timeline() if e.get("ph") == "X" and e.get("name", "").endswith(kind)
                and e["ts"] >= start_us]
    while True:
        maps, finishes = tasks(".map_task"), tasks(".finish_task")
        if len(maps) >= len(corpus) and len(finishes) >= len(corpus) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for kind in (maps, finishes):
        assert len(kind) == len(corpus)
        per_node = Counter(node_of.get(e["tid"].split(":", 1)[1], "?") for e in kind)
        assert "?" not in per_node and len(per_node) == 2, per_node
        assert sorted(per_node.values()) == [len(corpus) // 2, len(corpus) // 2], per_node


def test_parquet_output_equals_local(cluster, driver, corpus, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    config = dict(CONFIG, format="parquet")
    FusedPipeline(**config).run(corpus, str(tmp_path / "local"), resume=False)
    driver()
    FusedPipeline(**config).run(corpus, str(tmp_path / "ray"), resume=False, executor="ray")

    def table(out):
        parts = sorted(glob.glob(os.path.join(out, "part-*.parquet")))
        return [row for p in parts for row in pq.read_table(p).to_pylist()]

    assert table(str(tmp_path / "ray")) == table(str(tmp_path / "local"))


# resolve and finish: the finishes wait on the resolvers' objects (Note [decisions as object refs]); a
# resolver killed is retried and its finishes start once its retry's objects exist
@pytest.mark.parametrize("point", ["map:2", "exact_reduce:0", "band_reduce:1", "resolve:1", "finish:3"])
def test_worker_sigkill_during_map_and_shuffle(cluster, driver, corpus, local, tmp_path, point):
    once = tmp_path / "crashed"
    driver(LUMINAMOON_RAY_CRASH_AT=point, LUMINAMOON_RAY_CRASH_ONCE=str(once))
    result = run_ray(corpus, str(tmp_path / "out"))
    assert once.exists(), f"the worker at {point} was killed"
    assert_same(result, local)


def test_second_node_stopped_mid_run(cluster, driver, corpus, local, tmp_path):
    driver()
    stopped = []

    def progress(line: str) -> None:
        if line.startswith("map 2/") and not stopped:
            cluster.stop_worker()  # SIGKILL of the node's raylet, object store and workers
            stopped.append(line)

    try:
        result = run_ray(corpus, str(tmp_path / "out"), progress=progress)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.start_worker()
    assert stopped
    assert_same(result, local)


def cli(args: list, env: dict | None = None) -> subprocess.CompletedProcess:
    # HOME of the cluster's nodes: no other Ray user's ~/.ray/auth_token (ray_cluster.RayNode)
    home = os.path.join(os.path.dirname(os.path.dirname(args[0])), "home")
    os.makedirs(home, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "luminamoon.data.cli", "run", *args], capture_output=True,
                          text=True, env=dict(os.environ, HOME=home, **(env or {})), timeout=300)


def test_driver_sigkill_then_resume(cluster, corpus, local, tmp_path):
    out = str(tmp_path / "out")
    args = [*corpus, "-o", out, "--executor", "ray", "--address", cluster.address, "--format", "ndjson",
            "--write-dropped", "--part-rows", "150", "--batch-docs", "64"]
    killed = cli(args, {"LUMINAMOON_RAY_CRASH_AT": "driver:finish:3"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not os.path.exists(os.path.join(out, "summary.json"))
    finished = glob.glob(os.path.join(out, "_ray", "finish", "shard-*[0-9]"))
    assert len(finished) >= 3
    resumed = cli(args)
    assert resumed.returncode == 0, resumed.stderr
    assert_same(read_run(out), local)
    with open(os.path.join(out, "summary.json")) as f:
        this_run = json.load(f)["this_run"]
    assert this_run["resumed"] is True and this_run["documents"] < local["summary"]["documents_in"]
    # killed again while renaming the parts into place: the rerun completes them
    crashed = cli(args + ["--no-resume"], {"LUMINAMOON_RAY_CRASH_AT": "driver:commit"})
    assert crashed.returncode == -signal.SIGKILL
    assert cli(args).returncode == 0
    assert_same(read_run(out), local)


def test_bad_input_same_errors_as_local(cluster, driver, corpus, tmp_path):
    driver()
    missing = str(tmp_path / "missing.jsonl")
    errors = []
    for executor in ("local", "ray"):
        with pytest.raises(DataError) as e:
            FusedPipeline(**CONFIG).run([*corpus, missing], str(tmp_path / executor), executor=executor)
        errors.append((str(e.value), e.value.exit_code))
    assert errors[0] == errors[1] and errors[0][1] == 3
    # --strict: the first malformed record in stream order fails both runs alike
    strict = dict(CONFIG, strict=True)
    errors = []
    for executor in ("local", "ray"):
        with pytest.raises(DataError) as e:
            FusedPipeline(**strict).run(corpus, str(tmp_path / f"strict-{executor}"), executor=executor,
                                        resume=False)
        errors.append((str(e.value), e.value.exit_code))
    assert errors[0] == errors[1] and errors[0][1] == 3 and "strict mode" in errors[0][0]
    with pytest.raises(DataError) as e:
        FusedPipeline(**CONFIG).run(corpus, str(tmp_path / "x"), executor="rya")
    assert e.value.exit_code == 2 and "did you mean 'ray'" in str(e.value)


def test_embedded_instance_from_the_cli(cluster, corpus, local, tmp_path):
    """Without --address the run starts (and stops) its own local Ray."""
    out = str(tmp_path / "out")
    done = cli([*corpus, "-o", out, "--executor", "ray", "--workers", "2", "--format", "ndjson",
                "--write-dropped", "--part-rows", "150", "--batch-docs", "64"])
    assert done.returncode == 0, done.stderr
    assert "documents in" in done.stdout and "[ray]: finish" in done.stderr
    assert_same(read_run(out), local)
