"""Writers: every format we write is read back by pyarrow (and Parquet by
polars) and equals the documents that went in; parts split by rows or bytes
and sort in stream order; dropped and metrics outputs; summary.json."""
from __future__ import annotations

import json
import os

import pytest

pa = pytest.importorskip("pyarrow")

from luminamoon.data.cli import generate_corpus  # noqa: E402
from luminamoon.data.pipeline import FusedPipeline, arrow_io_available  # noqa: E402
from test_pipeline_support import part_files, read_part, read_rows, write_jsonl  # noqa: E402

RAW = dict(clean=False, quality=False, dedup=False, minhash=False, pii=False)
FORMATS = ["ndjson"] + (["parquet", "arrow", "arrow_stream"] if arrow_io_available() else [])

RECORDS = [{"id": f"r{i}", "text": f"document {i} \u00e9\u4e2d " + "x" * (i % 5), "n": i,
            "score": i / 8, "ok": i % 2 == 0, "lang": "en" if i % 3 else "fr"} for i in range(23)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_back_equal(tmp_path, fmt):
    write_jsonl(tmp_path / "in.jsonl", RECORDS)
    out = tmp_path / "out"
    summary = FusedPipeline(**dict(RAW, format=fmt, part_rows=5, batch_docs=5)).run(
        [str(tmp_path / "in.jsonl")], out, resume=False)
    parts = part_files(str(out))
    assert len(parts) == summary["parts"] == 5
    assert parts == sorted(parts)
    rows = read_rows(str(out))
    assert rows == RECORDS
    assert summary["bytes_out"] == sum(os.path.getsize(p) for p in parts)
    if fmt == "parquet":
        pl = pytest.importorskip("polars")
        frame = pl.concat([pl.read_parquet(p) for p in parts])
        assert frame.to_dicts() == RECORDS
        assert pa.parquet.ParquetFile(parts[0]).metadata.row_group(0).column(0).compression == "ZSTD"


@pytest.mark.parametrize("fmt", FORMATS)
def test_parts_split_by_bytes(tmp_path, fmt):
    write_jsonl(tmp_path / "in.jsonl", [{"text": "y" * 1000} for _ in range(40)])
    out = tmp_path / "out"
    summary = FusedPipeline(**dict(RAW, format=fmt, part_bytes=4000, batch_docs=2)).run(
        [str(tmp_path / "in.jsonl")], out, resume=False)
    assert summary["parts"] == 10  # 2 documents per batch, a part closes at >= 4000 text bytes
    assert [len(read_part(p)) for p in part_files(str(out))] == [4] * 10


@pytest.mark.skipif(not arrow_io_available(), reason="Parquet needs luminamoon._data_io")
def test_full_pipeline_outputs_agree_across_formats(tmp_path):
    corpus = generate_corpus(str(tmp_path / "corpus"), shards=2, docs_per_shard=300, seed=3)
    outputs = {}
    for fmt in ("parquet", "ndjson"):
        out = tmp_path / fmt
        summary = FusedPipeline(format=fmt, write_dropped=True, write_metrics=True, part_rows=200).run(
            corpus, out, resume=False)
        outputs[fmt] = (summary, out)
    (s_pq, out_pq), (s_nd, out_nd) = outputs["parquet"], outputs["ndjson"]
    kept = read_rows(str(out_pq))
    assert kept == read_rows(str(out_nd))
    assert len(kept) == s_pq["documents_kept"] > 0
    # Dropped documents: one row each, with the reasons the summary counts.
    dropped = read_rows(str(out_pq / "dropped"))
    counts: dict = {}
    for row in dropped:
        counts.setdefault(row["stage"], {}).setdefault(row["reason"], 0)
        counts[row["stage"]][row["reason"]] += 1
    assert counts == s_pq["dropped"]
    assert s_pq["documents_kept"] + sum(n for r in counts.values() for n in r.values()) == \
        s_pq["records_in"]
    near = [r for r in dropped if r["reason"] == "near_duplicate"]
    assert near and all(r["detail"].startswith("shard-") for r in near)  # names the matched document
    # Metrics: one row per document the quality stage measured, float columns.
    metrics = read_part(part_files(str(out_pq / "metrics"))[0])
    assert metrics.schema.field("entropy").type == pa.float64()
    assert metrics.schema.field("word_count").type == pa.float64()
    ids = {r["id"] for r in kept}
    assert ids <= set(read_rows(str(out_pq / "metrics"))[i]["id"] for i in range(
        sum(len(read_part(p)) for p in part_files(str(out_pq / "metrics")))))
    # No PII survives in the kept text.
    assert not any("@example.org" in r["text"] or "4111 1111 1111 1111" in r["text"] for r in kept)
    assert s_pq["counters"]["pii.email"] > 0
    with open(out_pq / "summary.json") as f:
        on_disk = json.load(f)
    assert on_disk["documents_kept"] == s_pq["documents_kept"]
    assert on_disk["bytes_in"] == sum(os.path.getsize(p) for p in corpus)
    assert on_disk["this_run"]["documents_per_second"] > 0


def test_arrow_formats_unavailable_message_mentions_ndjson(tmp_path, monkeypatch):
    from luminamoon.data import pipeline as data_pipeline
    monkeypatch.setattr(data_pipeline, "_backend_module", __import__("luminamoon._native").__dict__["_native"])
    write_jsonl(tmp_path / "in.jsonl", RECORDS[:2])
    with pytest.raises(data_pipeline.DataError) as e:
        FusedPipeline(**dict(RAW, format="parquet")).run([str(tmp_path / "in.jsonl")], tmp_path / "o")
    assert e.value.exit_code == 7 and "ndjson" in str(e.value)


@pytest.mark.parametrize("fmt", FORMATS)
def test_parts_are_written_row_group_by_row_group(tmp_path, fmt):
    # Note [Arrow parts are streamed]: a part of several row groups, each
    # written as it fills; a field first seen in a
    # later row group, and a field that is an integer early and a float later,
    # still give the part's columns of Note [metadata columns] (the union over
    # the whole part, typed by all its values).
    records = []
    for i in range(50):
        r = {"id": f"r{i}", "text": f"row {i} " + "z" * (i % 7), "n": i if i < 30 else i + 0.5}
        if i >= 37:
            r["late"] = f"v{i}"
        records.append(r)
    write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out"
    summary = FusedPipeline(**dict(RAW, format=fmt, row_group_rows=8, part_rows=25, batch_docs=5)).run(
        [str(tmp_path / "in.jsonl")], out, resume=False)
    parts = part_files(str(out))
    assert summary["parts"] == len(parts) == 2  # parts close at batch ends: 25 rows each
    rows = read_rows(str(out))
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    assert [r["text"] for r in rows] == [r["text"] for r in records]
    assert [r["n"] for r in rows] == [r["n"] for r in records]  # 24 == 24.0 where the part's column is float64
    assert [r.get("late") for r in rows] == [r.get("late") for r in records]
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]  # no temporary file left
    if fmt == "parquet":
        meta = [pa.parquet.ParquetFile(p).metadata for p in parts]
        assert [m.num_row_groups for m in meta] == [4, 4]  # 8 + 8 + 8 + 1 rows
        assert [m.num_rows for m in meta] == [25, 25]
        schemas = [pa.parquet.read_schema(p) for p in parts]
        assert str(schemas[0].field("n").type) == "int64" and "late" not in schemas[0].names
        assert str(schemas[1].field("n").type) == "double" and str(schemas[1].field("late").type) == "string"


def metadata_column_reference(values: list) -> tuple[str, list]:
    """Note [metadata columns] written out again: a column's type and values from
    all of the part's values of one field (None where a row lacks it)."""
    def kind(v):
        if v is None:
            return None
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float):
            return "double"
        return "str" if isinstance(v, str) else "json"
    kinds = {kind(v) for v in values} - {None}
    if kinds <= {"int"} and kinds:
        return "int64", values
    if kinds <= {"int", "double"} and kinds:
        return "double", [None if v is None else float(v) for v in values]
    if kinds == {"bool"}:
        return "bool", values
    if kinds <= {"str"}:
        return "string", values
    return "string", [v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in values]


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "ndjson"])
def test_a_late_row_group_that_widens_the_columns_rewrites_the_part(tmp_path, fmt):
    # Note [a widened part is rewritten]: row groups of 3 rows; fields that
    # appear late, turn from null to int, from int to float, from int to a
    # string, from bool to an object and from string to an array. The part's
    # columns must be those of the reference over the whole part, and equal
    # to the same part written as one row group.
    records = []
    for i in range(14):
        r = {"id": f"r{i}", "text": f"row {i} " + "y" * (i % 4)}
        if i >= 8:
            r["late"] = f"v{i}"
        r["null_then_int"] = None if i < 5 else i
        r["int_then_float"] = i if i < 6 else i + 0.5
        r["int_then_str"] = "x" if i == 9 else i
        r["bool_then_obj"] = {"a": [1, "b"]} if i == 10 else i % 2 == 0
        r["str_then_arr"] = [1, 2.5] if i == 11 else f"s{i}"
        r["always_null"] = None
        records.append(r)
    write_jsonl(tmp_path / "in.jsonl", records)
    tables = {}
    for groups in (3, 1000):
        out = tmp_path / f"out{groups}"
        FusedPipeline(**dict(RAW, format=fmt, row_group_rows=groups, batch_docs=4)).run(
            [str(tmp_path / "in.jsonl")], out, resume=False)
        parts = part_files(str(out))
        assert len(parts) == 1
        assert not [f for f in os.listdir(out) if f.endswith(".tmp")]
        tables[groups] = read_part(parts[0])
        if fmt == "parquet":
            assert pa.parquet.ParquetFile(parts[0]).metadata.num_row_groups == (5 if groups == 3 else 1)
    table = tables[3]
    assert table.column("text").to_pylist() == [r["text"] for r in records]
    for name in ("id", "late", "null_then_int", "int_then_float", "int_then_str", "bool_then_obj",
                 "str_then_arr", "always_null"):
        type_name, values = metadata_column_reference([r.get(name) for r in records])
        assert str(table.schema.field(name).type) == type_name, name
        assert table.column(name).to_pylist() == values, name
    assert table.schema.names == tables[1000].schema.names  # columns in the order first seen
    assert table.to_pylist() == tables[1000].to_pylist()


FULL_DISK_RUN = """
import resource, signal, sys
from luminamoon.data.pipeline import FusedPipeline, DataError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (96 << 10, 96 << 10))  # no file may pass 96 KiB
try:
    FusedPipeline(clean=False, quality=False, dedup=False, minhash=False, pii=False, format=sys.argv[3],
                  row_group_rows=40, part_rows=400, batch_docs=20).run([sys.argv[1]], sys.argv[2], resume=False)
except DataError as e:
    print("DataError", e.exit_code, e)
"""


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "ndjson"])
def test_a_part_that_cannot_be_written_fails_the_run_and_a_resume_writes_it_whole(tmp_path, fmt):
    # A file-size limit stands in for a full disk: a row group's write fails
    # part way through a part (after a widening rewrite, at row 60). The run
    # stops with an output error and publishes no part; the resume, without
    # the limit, writes every row once.
    import random
    import subprocess
    import sys
    rng = random.Random(7)
    records = [{"id": f"r{i}", "text": "".join(rng.choice("abcdefghij klmnop") for _ in range(700)),
                "n": i if i < 60 else i + 0.25} for i in range(400)]
    write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out"
    child = subprocess.run([sys.executable, "-c", FULL_DISK_RUN, str(tmp_path / "in.jsonl"), str(out), fmt],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("DataError 6 "), child.stdout  # "output: the output cannot be written"
    assert "File too large" in child.stdout and ".tmp" in child.stdout, child.stdout
    assert part_files(str(out)) == []
    FusedPipeline(**dict(RAW, format=fmt, row_group_rows=40, part_rows=400, batch_docs=20)).run(
        [str(tmp_path / "in.jsonl")], out, resume=True)
    rows = read_rows(str(out))
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    assert [r["text"] for r in rows] == [r["text"] for r in records]
    assert [r["n"] for r in rows] == [float(r["n"]) for r in records]
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]


# --- Parquet data pages (Note [Parquet pages]) -------------------------------------------------
# Page headers are Thrift compact-protocol structs (the Parquet format's parquet.thrift): read here
# from the file's bytes, independently of Arrow, to see how the text column was cut into pages.

def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _skip(buf, i, ctype):
    """Skips one compact-protocol value of type `ctype`; returns the index after it."""
    if ctype in (1, 2):  # bool true/false, inside the field header
        return i
    if ctype == 3:  # byte
        return i + 1
    if ctype in (4, 5, 6):  # i16, i32, i64: zigzag varints
        return _varint(buf, i)[1]
    if ctype == 7:  # double
        return i + 8
    if ctype == 8:  # binary
        n, i = _varint(buf, i)
        return i + n
    if ctype in (9, 10):  # list, set
        head = buf[i]
        i += 1
        n, etype = head >> 4, head & 0x0F
        if n == 15:
            n, i = _varint(buf, i)
        for _ in range(n):
            i = 1 + i if etype in (1, 2) else _skip(buf, i, etype)
        return i
    if ctype == 12:  # struct
        return _struct(buf, i)[1]
    raise ValueError(f"compact type {ctype} not expected in a page header")


def _struct(buf, i):
    """Top-level i32 fields of a struct by id, and the index after the struct."""
    fields, last = {}, 0
    while True:
        head = buf[i]
        i += 1
        if head == 0:
            return fields, i
        delta, ctype = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            z, i = _varint(buf, i)
            fid = (z >> 1) ^ -(z & 1)
        last = fid
        if ctype == 5:
            z, i = _varint(buf, i)
            fields[fid] = (z >> 1) ^ -(z & 1)
        else:
            i = _skip(buf, i, ctype)


def _pages(path, column):
    """(page type, uncompressed size) of every page of `column` in row group 0."""
    meta = pa.parquet.ParquetFile(path).metadata.row_group(0).column(column)
    start = meta.dictionary_page_offset if meta.has_dictionary_page else meta.data_page_offset
    with open(path, "rb") as f:
        f.seek(start)
        buf = f.read(meta.total_compressed_size)
    pages, i = [], 0
    while i < len(buf):
        header, i = _struct(buf, i)
        pages.append((header[1], header[2]))  # PageHeader.type, .uncompressed_page_size
        i += header[3]  # compressed_page_size
    return pages


@pytest.mark.skipif(not arrow_io_available(), reason="Parquet needs luminamoon._data_io")
def test_parquet_text_pages_are_about_a_mebibyte(tmp_path):
    import random
    rng = random.Random(3)
    words = ["river", "garden", "model", "winter", "language", "the", "of"]
    records = [{"id": f"r{i}", "text": " ".join(rng.choice(words) for _ in range(rng.randint(400, 1200)))}
               for i in range(3000)]  # ~4 KB a document, ~13 MB in all
    write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out"
    FusedPipeline(**dict(RAW, format="parquet")).run([str(tmp_path / "in.jsonl")], out, resume=False)
    (part,) = part_files(str(out))
    assert read_rows(str(out)) == records
    pf = pa.parquet.ParquetFile(part)
    names = pf.schema_arrow.names
    text = pf.metadata.row_group(0).column(names.index("text"))
    ident = pf.metadata.row_group(0).column(names.index("id"))
    # The text column: no dictionary, no statistics; the metadata columns keep both.
    assert not text.has_dictionary_page and not text.is_stats_set
    assert ident.has_dictionary_page and ident.is_stats_set
    pages = _pages(part, names.index("text"))
    data_pages = [size for kind, size in pages if kind in (0, 3)]  # DATA_PAGE, DATA_PAGE_V2
    assert len(data_pages) == len(pages)
    assert sum(data_pages) >= 12e6
    # Pages of about 1 MiB (Arrow's default write batch of 1,024 rows made ~4 MB pages here).
    assert max(data_pages) <= 1.25 * 2 ** 20, data_pages
    assert len(data_pages) >= 10


@pytest.mark.skipif(not arrow_io_available(), reason="Parquet needs luminamoon._data_io")
def test_parquet_zstd_level_defaults_to_arrows_own(tmp_path):
    # The default is Arrow's (what pyarrow.parquet.write_table(compression="zstd") writes), and it reaches
    # the writer: the default run compresses exactly as one that names that level, and not as level 19.
    pq = pytest.importorskip("pyarrow.parquet")
    arrow_level = pa.Codec.default_compression_level("zstd")
    write_jsonl(tmp_path / "in.jsonl", [{"text": f"line {i % 97} of a text that repeats " * 20} for i in range(400)])

    def text_bytes(**level):
        out = tmp_path / f"out{level}"
        FusedPipeline(**dict(RAW, format="parquet"), **level).run([str(tmp_path / "in.jsonl")], out, resume=False)
        meta = pq.ParquetFile(part_files(str(out))[0]).metadata
        return sum(meta.row_group(g).column(0).total_compressed_size for g in range(meta.num_row_groups))

    assert text_bytes() == text_bytes(compression_level=arrow_level)
    assert text_bytes() != text_bytes(compression_level=19)
