"""Resume inside a shard: Parquet row groups before the checkpoint are skipped
without being decoded (proved by damaging them after the checkpoint), and
compressed line formats continue at the decompressed byte offset."""
from __future__ import annotations

import gzip
import os

import pytest

from luminamoon.data.pipeline import arrow_io_available
from test_pipeline_support import long_text, read_rows, run_cli

pytestmark = pytest.mark.skipif(not arrow_io_available(), reason="needs luminamoon._data_io")


def _args(src, out):
    return ["run", src, "-o", str(out), "--format", "parquet", "--part-rows", "10", "--batch-docs", "5",
            "--no-minhash", "--write-dropped", "--progress", "none"]


def test_parquet_resume_skips_committed_row_groups_undecoded(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    src = str(tmp_path / "in.parquet")
    table = pa.table({"id": [f"p{i}" for i in range(100)], "text": [long_text(i) for i in range(100)]})
    pq.write_table(table, src, row_group_size=10, compression="none")
    ref = tmp_path / "ref"
    assert run_cli(_args(src, ref)).returncode == 0
    out = tmp_path / "out"
    r = run_cli(_args(src, out), env={"LUMINAMOON_TEST_CRASH_AT": "meta_written:6"})
    assert r.returncode == -9
    # Damage the first two row groups' text pages, keeping size and mtime: a
    # resumed run that decoded them would report malformed rows or fail.
    meta = pq.ParquetFile(src).metadata
    stat = os.stat(src)
    with open(src, "r+b") as f:
        for g in (0, 1):
            col = meta.row_group(g).column(1)
            start = col.data_page_offset + 8
            f.seek(start)
            f.write(b"\xff" * (col.total_compressed_size - 16))
    os.utime(src, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    r = run_cli(_args(src, out))
    assert r.returncode == 0, r.stderr
    assert read_rows(str(out)) == read_rows(str(ref))
    assert read_rows(str(out / "dropped")) == read_rows(str(ref / "dropped"))
    # The damage is real: a run that reads those row groups sees it.
    fresh = tmp_path / "fresh"
    run_cli(_args(src, fresh))
    assert read_rows(str(fresh)) != read_rows(str(ref))


def test_gzip_jsonl_resumes_at_the_decompressed_offset(tmp_path):
    import json
    src = str(tmp_path / "in.jsonl.gz")
    with gzip.open(src, "wt", encoding="utf-8") as f:
        for i in range(120):
            f.write(json.dumps({"id": f"g{i}", "text": long_text(i)}) + "\n")
    ref = tmp_path / "ref"
    assert run_cli(_args(src, ref)).returncode == 0
    out = tmp_path / "out"
    for crash in ("meta_written:3", "part_renamed:2", "state_synced:4"):
        r = run_cli(_args(src, out), env={"LUMINAMOON_TEST_CRASH_AT": crash})
        assert r.returncode == -9
    assert run_cli(_args(src, out)).returncode == 0
    rows = read_rows(str(out))
    assert rows == read_rows(str(ref)) and len(rows) == 120
