"""The global dedup resolution (luminamoon.data.global_dedup) without Ray:
its pieces against hand-written references (a dict for first occurrences, a
union-find for components), and the Ray executor's task functions run in
order in this process against the local run, for several partition counts
and configs (exact dedup of normalized text, minhash alone, kperm)."""
from __future__ import annotations

import glob
import json
import os
import random

import numpy as np
import pytest

from luminamoon.data import FusedPipeline
from luminamoon.data import global_dedup as gd
from luminamoon.data.cli import generate_corpus


def test_exact_decisions_match_a_first_occurrence_dict():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 40, size=500).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    refs = rng.permutation(10_000)[:500].astype(np.int64)
    first: dict[int, int] = {}
    expected = {}
    for k, r in sorted(zip(keys.tolist(), refs.tolist()), key=lambda kr: kr[1]):
        if k in first:
            expected[r] = first[k]
        else:
            first[k] = r
    dropped, matched = gd.exact_decisions(keys, refs)
    assert dict(zip(dropped.tolist(), matched.tolist())) == expected
    assert list(dropped) == sorted(dropped)
    # split by key range and resolved per range: the same
    parts = gd.split_rows(gd.key_partition(keys, 4), 4, keys, refs)
    pieces = [gd.exact_decisions(*p) for p in parts]
    assert dict(zip(np.concatenate([p[0] for p in pieces]).tolist(),
                    np.concatenate([p[1] for p in pieces]).tolist())) == expected


def union_find_components(a, b):
    parent: dict[int, int] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a, b):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    return {x: min(y for y in parent if find(y) == find(x)) for x in parent}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_components_match_union_find(seed):
    rng = random.Random(seed)
    nodes = rng.sample(range(1, 10**6), 300)
    a = [rng.choice(nodes) for _ in range(250)]
    b = [rng.choice(nodes) for _ in range(250)]
    got_nodes, labels = gd.components(np.array(a), np.array(b))
    assert dict(zip(got_nodes.tolist(), labels.tolist())) == union_find_components(a, b)


def test_candidate_edges_join_each_bucket_without_excluded_rows():
    band = np.array([0, 0, 0, 1, 1, 0, 1], dtype=np.int16)
    keys = np.array([7, 7, 9, 7, 7, 7, 8], dtype=np.uint64)
    refs = np.array([30, 10, 11, 10, 40, 20, 50], dtype=np.int64)
    bucket, members = gd.bucket_members(band, keys, refs)
    # (0, 7) holds 30, 10, 20 and (1, 7) holds 10, 40; (0, 9) and (1, 8) hold one each
    assert sorted(members.tolist()) == [10, 10, 20, 30, 40]
    groups: dict[int, set] = {}
    for k, r in zip(bucket.tolist(), members.tolist()):
        groups.setdefault(k, set()).add(r)
    assert sorted(map(sorted, groups.values())) == [[10, 20, 30], [10, 40]]
    a, b = gd.candidate_edges(bucket, members)
    assert sorted(zip(a.tolist(), b.tolist())) == [(10, 20), (10, 30), (10, 40)]
    a, b = gd.candidate_edges(bucket, members, excluded=np.array([10]))
    assert sorted(zip(a.tolist(), b.tolist())) == [(20, 30)]


@pytest.mark.parametrize("table_limit", [1 << 26, 16])  # the dense table, and the fallback past its limit
def test_membership_of_refs_equals_a_python_set(monkeypatch, table_limit):
    monkeypatch.setattr(gd, "_MEMBER_TABLE_LIMIT", table_limit)
    rng = np.random.default_rng(5)
    refs = (rng.integers(0, 6, 3000).astype(np.int64) << gd.REF_LINE_BITS) | rng.integers(0, 900, 3000)
    of = np.concatenate([rng.choice(refs, 200), (np.int64(7) << gd.REF_LINE_BITS) | np.arange(5)])  # shard 7: no ref
    members = set(of.tolist())
    assert gd._member(refs, of).tolist() == [r in members for r in refs.tolist()]
    assert not gd._member(refs[:5], np.array([1 << gd.REF_LINE_BITS | 901], dtype=np.int64)).any()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_buckets_by_key_range_give_the_edges_of_a_bucket_dict(seed):
    """Bucket rows found per key range, then the edges of their survivors,
    against a dict of (band, key) -> refs over all rows at once."""
    rng = np.random.default_rng(seed)
    docs, bands = 400, 4
    refs = rng.permutation(10**6)[:docs].astype(np.int64)
    # uniform 64-bit keys as XXH3 gives them, few distinct ones per band, so that buckets of 2 or more are common
    pools = rng.integers(0, 2**64, size=(bands, 150), dtype=np.uint64)
    keys = pools[np.arange(bands), rng.integers(0, 150, size=(docs, bands))]
    band, flat_keys, flat_refs = gd.band_rows(keys, refs, bands)
    excluded = rng.choice(refs, 40, replace=False)  # unsorted, as the driver's concatenation of key ranges
    buckets: dict[tuple, list] = {}
    for bd, k, r in zip(band.tolist(), flat_keys.tolist(), flat_refs.tolist()):
        if r not in set(excluded.tolist()):
            buckets.setdefault((bd, k), []).append(r)
    expected = sorted((min(rs), r) for rs in buckets.values() if len(rs) >= 2 for r in rs if r != min(rs))
    parts = gd.split_rows(gd.key_partition(flat_keys, 3), 3, band, flat_keys, flat_refs)
    found = [gd.bucket_members(*part) for part in parts]
    a, b = gd.candidate_edges(np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]), excluded)
    assert sorted(zip(a.tolist(), b.tolist())) == expected
    assert len(expected) > 100


# ---------------------------------------------------------------- whole run, serially
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return generate_corpus(str(tmp_path_factory.mktemp("gd")), shards=5, docs_per_shard=160, seed=4)


def read(out: str) -> tuple:
    rows = []
    for pattern in ("part-*.ndjson", "dropped/part-*.ndjson", "metrics/part-*.ndjson"):
        lines = []
        for p in sorted(glob.glob(os.path.join(out, pattern))):
            lines += [json.loads(x) for x in open(p, encoding="utf-8")]
        rows.append(lines)
    return tuple(rows)


def serial_run(config: dict, shards: list, out: str, partitions: int) -> tuple:
    """The Ray executor's stages (ray_executor._run_stages) in order, here."""
    from luminamoon.data import ray_executor as rx
    from luminamoon.data.pipeline import PipelineConfig

    native = PipelineConfig.from_dict(config).to_native()
    maps = [rx.map_task(native, shards, s, partitions) for s in range(len(shards))]
    exact = [rx.exact_reduce_task(out, p, *[m[p] for m in maps]) for p in range(partitions)]
    ex_drop = np.concatenate([e[0] for e in exact])
    ex_match = np.concatenate([e[1] for e in exact])
    buckets = [rx.band_reduce_task(out, p, *[m[partitions + p] for m in maps]) for p in range(partitions)]
    edges = gd.candidate_edges(np.concatenate([k for k, _ in buckets]), np.concatenate([r for _, r in buckets]),
                               ex_drop)
    nodes, labels = gd.components(*edges)
    owner = gd.component_partition(labels, partitions)
    picked = [[] for _ in range(partitions)]
    per_shard_wanted = gd.split_rows(gd.ref_shard(nodes), len(shards), nodes, owner)
    # the pickers of two "nodes": the even and the odd shards
    for node in (0, 1):
        ss = [s for s in range(node, len(shards), 2) if per_shard_wanted[s][0].size]
        if not ss:
            continue
        rows = rx.signature_rows_task(partitions, [per_shard_wanted[s][0] for s in ss],
                                      [per_shard_wanted[s][1] for s in ss], *[maps[s][2 * partitions] for s in ss])
        for p, r in enumerate(rows if partitions > 1 else [rows]):
            picked[p].append(r)
    near = [rx.resolve_task(native, out, p, len(shards), *picked[p]) for p in range(partitions)] \
        if native["minhash"] else []
    # the finishes take the exact drops of their shard and each resolver's decisions of that shard
    exact_of = gd.split_rows(gd.ref_shard(ex_drop), len(shards), ex_drop, ex_match)
    totals = [rx.finish_task(native, shards, s, out, exact_of[s][0], np.zeros(exact_of[s][0].size, np.uint8),
                             exact_of[s][1], maps[s][2 * partitions + 1], *[r[s] for r in near])
              for s in range(len(shards))]
    rx._commit_parts(rx._Layout(out), [json.loads(t) for t in totals], config["format"])
    return read(out)


@pytest.mark.parametrize("partitions,extra", [
    (1, {}), (3, {}), (7, {"dedup_normalized": True}), (2, {"dedup": False}), (4, {"minhash_scheme": "kperm"}),
    (2, {"write_metrics": True}),
])
def test_serial_stages_equal_the_local_run(corpus, tmp_path, partitions, extra):
    config = dict(format="ndjson", write_dropped=True, part_rows=90, **extra)
    FusedPipeline(**config).run(corpus, str(tmp_path / "local"), resume=False)
    local = read(str(tmp_path / "local"))
    reasons = {d["reason"] for d in local[1]}
    assert bool(local[2]) == config.get("write_metrics", False)
    assert "near_duplicate" in reasons and ("exact_duplicate" in reasons) == config.get("dedup", True)
    assert serial_run(config, corpus, str(tmp_path / "dist"), partitions) == local


def test_serial_stages_of_one_shard_equal_the_local_run(corpus, tmp_path):
    """One shard: each resolver's decisions come as one shard's object and the count (two returns)."""
    config = dict(format="ndjson", write_dropped=True, part_rows=90)
    FusedPipeline(**config).run(corpus[:1], str(tmp_path / "local"), resume=False)
    local = read(str(tmp_path / "local"))
    assert "near_duplicate" in {d["reason"] for d in local[1]}
    assert serial_run(config, corpus[:1], str(tmp_path / "dist"), 3) == local


def test_finish_refuses_a_plan_that_meets_no_document(corpus, tmp_path):
    from luminamoon.data import DataError
    from luminamoon.data.pipeline import PipelineConfig, _backend

    tasks = _backend()._ShardTasks(PipelineConfig(format="ndjson").to_native(), corpus)
    with pytest.raises(DataError) as e:
        tasks.finish_shard(0, str(tmp_path / "f"), np.array([(0 << 40) | 999_999], dtype=np.int64),
                           np.array([0], dtype=np.uint8), np.array([1], dtype=np.int64))
    assert e.value.exit_code == 5 and "met no document" in str(e.value)


def test_finish_refuses_damaged_saved_batches(corpus, tmp_path):
    """The finish continues from the batches the map saved; a truncated
    buffer, another shard's or one that is not a saved batch buffer is a clear
    error (exit code 4, the state is damaged), and the finish writes no part."""
    from luminamoon.data import DataError
    from luminamoon.data import ray_executor as rx
    from luminamoon.data.pipeline import PipelineConfig, _backend

    native = PipelineConfig(format="ndjson").to_native()
    saved = rx.map_task(native, corpus, 0, 1)[-2]
    data = saved.tobytes()
    assert data[:8] == b"LMSAVEDB"
    as_array = lambda b: np.frombuffer(b, dtype=np.uint8)  # noqa: E731
    tasks = _backend()._ShardTasks(native, corpus)
    none = (np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, np.int64))
    for shard, buffer, message in ((0, data[: len(data) // 2], "truncated"), (0, data[:-3], "truncated"),
                                   (0, data + b"\0", "after the end marker"), (1, data, "holds shard 0, expected 1"),
                                   (0, b"x" * 100, "not a saved batch buffer"), (0, b"", "not a saved batch buffer")):
        target = tmp_path / f"finish-{shard}-{len(buffer)}"
        with pytest.raises(DataError) as e:
            tasks.finish_shard(shard, str(target), *none, batches=as_array(buffer))
        assert e.value.exit_code == 4 and "saved batches" in str(e.value) and message in str(e.value)
        assert not glob.glob(str(target / "part-*"))


def test_a_task_body_runs_the_data_stages_on_the_tasks_cpu(monkeypatch):
    # Note [threads in a task]: inside a task the data engine's arenas hold the
    # task's one CPU, not every core; a value the user set for the workers stands.
    from luminamoon.data import batch
    from luminamoon.data import ray_executor as rx
    seen = rx._as_task(lambda a, b: (a + b, batch.get_num_threads()))
    # The wrapper would also set this test process's allocator to keep freed memory (Note [freed
    # memory kept], a worker's setting; tests/data/test_freed_memory.py checks it in child processes).
    monkeypatch.setenv("LUMINAMOON_KEEP_FREED_MEMORY", "0")
    monkeypatch.delenv("LUMINAMOON_NUM_THREADS", raising=False)
    assert seen(2, 3) == (5, 1)
    monkeypatch.setenv("LUMINAMOON_NUM_THREADS", "3")
    assert seen(2, 3) == (5, 3)
