"""Resume deep inside one Parquet row group: with the file's page index, the text column's pages
before the checkpoint row are skipped unread (counted by the reader), and the output equals an
uninterrupted run's; without a page index the same resume decodes and discards, with the same output."""
from __future__ import annotations

import pytest

from luminamoon.data.pipeline import FusedPipeline, arrow_io_available
from test_pipeline_support import long_text, read_rows, run_cli

pytestmark = pytest.mark.skipif(not arrow_io_available(), reason="needs luminamoon._data_io")

SETTINGS = dict(format="parquet", part_rows=10, batch_docs=5, minhash=False, write_dropped=True)


def _args(src, out):
    return ["run", src, "-o", str(out), "--format", "parquet", "--part-rows", "10", "--batch-docs", "5",
            "--no-minhash", "--write-dropped", "--progress", "none"]


@pytest.mark.parametrize("page_index", [True, False])
def test_resume_inside_a_row_group(tmp_path, page_index):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from luminamoon import _data_io
    src = str(tmp_path / "in.parquet")
    n = 150
    table = pa.table({"id": [f"p{i}" for i in range(n)], "text": [long_text(i) for i in range(n)],
                      "score": [i * 0.5 for i in range(n)]})
    # One row group, pages of ~1 KB (about two documents each).
    pq.write_table(table, src, row_group_size=n, data_page_size=1024, write_batch_size=2, write_page_index=page_index,
                   use_dictionary=False, compression="zstd")
    ref = tmp_path / "ref"
    assert run_cli(_args(src, ref)).returncode == 0
    out = tmp_path / "out"
    r = run_cli(_args(src, out), env={"LUMINAMOON_TEST_CRASH_AT": "meta_written:9"})
    assert r.returncode == -9  # killed with a checkpoint 90 rows into the only row group
    before = _data_io._parquet_pages_skipped()
    summary = FusedPipeline(**SETTINGS).run(src, out)
    skipped = _data_io._parquet_pages_skipped() - before
    assert summary["this_run"]["resumed"]
    assert read_rows(str(out)) == read_rows(str(ref))
    assert read_rows(str(out / "dropped")) == read_rows(str(ref / "dropped"))
    if page_index:
        assert skipped >= 20, skipped  # most of the text pages of the first 90 rows
    else:
        assert skipped == 0
