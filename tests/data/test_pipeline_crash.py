"""Crash safety, for real: the CLI is SIGKILLed at every phase of a commit and
at random instants, restarted with --resume each time, and the final output
must equal an uninterrupted run's (same documents, same order, nothing lost or
repeated), every file readable by pyarrow."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest

pa = pytest.importorskip("pyarrow")

from luminamoon.data.cli import generate_corpus  # noqa: E402
from luminamoon.data.pipeline import arrow_io_available  # noqa: E402
from test_pipeline_support import CLI, part_files, read_part, read_rows, run_cli, summary_counts  # noqa: E402

# The commit protocol's phases (src/data/state/crash_point.h).
PHASES = ("file_synced", "part_renamed", "state_synced", "meta_written")


def _args(corpus, out, fmt):
    # Parquet: row groups of 7 rows: parts of 24 rows are streamed as 7 + 7 + 7
    # + 3, each group written into the part's temporary file as it fills (Note
    # [Arrow parts are streamed]), so a kill lands while a part's temporary file
    # holds some of its row groups. NDJSON: each part is written
    # as its rows come (Note [NDJSON parts are streamed]), so a kill lands while
    # a part's temporary file holds some of its rows.
    config = os.path.join(os.path.dirname(corpus), "row_groups.toml")
    if not os.path.exists(config):
        with open(config, "w") as f:
            f.write("[output]\nrow_group_rows = 7\n")
    return ["run", corpus, "-o", out, "--format", fmt, "--part-rows", "20",
            "--batch-docs", "8", "--write-dropped", "--progress", "none", "--config", config]


@pytest.fixture(scope="module", params=["parquet", "ndjson"])
def corpus(request, tmp_path_factory):
    fmt = request.param
    if fmt == "parquet" and not arrow_io_available():
        pytest.skip("Parquet output needs luminamoon._data_io")
    root = tmp_path_factory.mktemp(f"crash-{fmt}")
    generate_corpus(str(root / "corpus"), shards=3, docs_per_shard=500, seed=11)
    reference = str(root / "reference")
    started = time.monotonic()
    r = run_cli(_args(str(root / "corpus"), reference, fmt))
    assert r.returncode == 0, r.stderr
    return root, reference, time.monotonic() - started, fmt


def _assert_same_output(out, reference):
    names = [os.path.basename(p) for p in part_files(out)]
    assert names == [os.path.basename(p) for p in part_files(reference)]
    kept, ref_kept = read_rows(out), read_rows(reference)
    assert len(kept) == len(ref_kept) > 0
    assert kept == ref_kept  # same documents, same order
    ids = [r["id"] for r in kept]
    assert len(ids) == len(set(ids)), "a document was written twice"
    assert read_rows(os.path.join(out, "dropped")) == read_rows(os.path.join(reference, "dropped"))
    assert summary_counts(out) == summary_counts(reference)
    for path in part_files(out) + part_files(os.path.join(out, "dropped")):
        read_part(path)  # every file readable
    leftovers = [f for _, _, files in os.walk(out) for f in files if f.endswith(".tmp")]
    assert leftovers == []


def test_sigkill_at_every_commit_phase_then_resume(corpus):
    root, reference, _, fmt = corpus
    out = str(root / "phases")
    kills = 0
    # These runs keep 16 exact-dedup keys and 64 LSH documents in memory, the
    # rest in their scratch files' runs (Note [exact-dedup keys on disk], Note
    # [band runs on disk]), rebuilt from the WALs at each resume; the
    # reference kept everything in memory.
    spill = {"LUMINAMOON_DEDUP_MEMORY_KEYS": "16", "LUMINAMOON_LSH_TAIL_DOCS": "64"}
    # Each run resumes the previous one's checkpoint and dies at the n-th
    # occurrence of a phase: every phase, at several depths, 20 kills.
    schedule = [(phase, n) for n in (1, 2, 3, 5, 2) for phase in PHASES]
    for phase, n in schedule:
        r = run_cli(_args(str(root / "corpus"), out, fmt), env={"LUMINAMOON_TEST_CRASH_AT": f"{phase}:{n}", **spill})
        if r.returncode == -signal.SIGKILL:
            kills += 1
        else:
            assert r.returncode == 0, r.stderr
    assert kills >= 20
    r = run_cli(_args(str(root / "corpus"), out, fmt), env=spill)
    assert r.returncode == 0, r.stderr
    _assert_same_output(out, reference)


def test_sigkill_at_random_instants_then_resume(corpus):
    root, reference, duration, fmt = corpus
    out = str(root / "random")
    rng = random.Random(5)
    kills = 0
    env = {k: v for k, v in os.environ.items() if k != "LUMINAMOON_TEST_CRASH_AT"}
    # Kill instants spread over a run's length (measured on the reference
    # run); each run resumes where the last checkpoint left the previous one.
    for _ in range(8):
        proc = subprocess.Popen(CLI + _args(str(root / "corpus"), out, fmt), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.2, 0.6) * duration)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        _, err = proc.communicate()
        assert proc.returncode in (0, -signal.SIGKILL), err.decode(errors="replace")
    r = run_cli(_args(str(root / "corpus"), out, fmt))
    assert r.returncode == 0, r.stderr
    assert kills >= 1
    _assert_same_output(out, reference)
