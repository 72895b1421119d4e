"""Readers: JSONL plain/gzip/zstd, TXT modes, Parquet, field names, metadata,
malformed records, and input resolution (dirs, globs, file:// URIs), checked
against Python reference parsing of the same files. Every stage is off, so
the output must be exactly what the reader produced."""
from __future__ import annotations

import gzip
import json
import os
import re

import pytest

from luminamoon.data.pipeline import DataError, FusedPipeline, arrow_io_available, resolve_inputs
from test_pipeline_support import write_jsonl

RAW = dict(clean=False, quality=False, dedup=False, minhash=False, pii=False, format="ndjson")


def _run(inputs, out, **config):
    settings = dict(RAW)
    settings.update(config)
    return FusedPipeline(**settings).run(inputs, out, resume=False)


RECORDS = [
    {"id": "a", "text": "plain ascii", "url": "http://x/a", "n": 1},
    {"text": "no id here \u00e9\u4e2d", "lang": "fr"},
    {"id": 7, "text": "numeric id", "tags": ["x", "y"], "meta": {"k": None}},
    {"id": "d", "text": "escapes \"quoted\" \\ and \n newline\ttab", "score": 0.25, "ok": True},
]


def _jsonl_bytes(records, extra_lines=()):
    lines = [json.dumps(r, ensure_ascii=False) for r in records] + list(extra_lines)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("compression", ["none", "gz", "zst"])
def test_jsonl_round_trip_every_field(tmp_path, compression):
    data = _jsonl_bytes(RECORDS)
    name = "in.jsonl"
    if compression == "gz":
        # Two gzip members, as `cat a.gz b.gz` makes: one stream.
        half = data.index(b"\n", len(data) // 2) + 1
        data, name = gzip.compress(data[:half]) + gzip.compress(data[half:]), "in.jsonl.gz"
    elif compression == "zst":
        pa = pytest.importorskip("pyarrow")
        data, name = pa.compress(data, codec="zstd", asbytes=True), "in.ndjson.zst"
        assert data[:4] == b"\x28\xb5\x2f\xfd"  # a real zstd frame
    (tmp_path / name).write_bytes(data)
    summary = _run([str(tmp_path / name)], tmp_path / "out")
    assert summary["documents_kept"] == len(RECORDS)
    # The kept documents keep the input's fields and JSON types.
    assert [dict(sorted(r.items())) for r in _ndjson(tmp_path / "out")] == \
        [dict(sorted(r.items())) for r in RECORDS]


def _ndjson(out):
    rows = []
    for p in sorted(os.listdir(out)):
        if p.startswith("part-"):
            with open(os.path.join(out, p), encoding="utf-8") as f:
                rows.extend(json.loads(line) for line in f)
    return rows


def test_malformed_lines_are_counted_with_shard_and_line(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(_jsonl_bytes(RECORDS[:2], ['{"text": "unterminated', '[1, 2]', '{"id": "x"}',
                                              '{"text": 5}', '', '{"text": "ok"} trailing']))
    out = tmp_path / "out"
    summary = FusedPipeline(**dict(RAW, write_dropped=True)).run([str(src)], out, resume=False)
    assert summary["documents_kept"] == 2
    assert summary["records_malformed"] == 5  # the blank line is not a record
    assert summary["dropped"]["reader"]["malformed"] == 5
    lines = sorted(e["line"] for e in summary["malformed_examples"])
    assert lines == [3, 4, 5, 6, 8]
    assert all(e["shard"] == str(src) for e in summary["malformed_examples"])
    dropped = _ndjson(out / "dropped")
    assert sorted(d["line"] for d in dropped) == [3, 4, 5, 6, 8]
    assert {d["reason"] for d in dropped} == {"malformed"}


def test_custom_text_and_id_fields(tmp_path):
    src = tmp_path / "c.jsonl"
    write_jsonl(src, [{"doc_id": f"k{i}", "content": f"body {i}", "text": "not me"} for i in range(5)])
    out = tmp_path / "out"
    FusedPipeline(**dict(RAW, text_field="content", id_field="doc_id", write_dropped=True)).run(
        [str(src)], out, resume=False)
    rows = _ndjson(out)
    assert [r["content"] for r in rows] == [f"body {i}" for i in range(5)]
    assert all(r["text"] == "not me" for r in rows)  # other fields pass through as metadata


@pytest.mark.parametrize("mode", ["file", "line", "paragraph"])
def test_txt_modes_against_python_splitting(tmp_path, mode):
    text = "first line\nsecond line\r\n\n\n  \nthird para l1\nthird para l2\n\nlast"
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    _run([str(tmp_path / "t.txt")], tmp_path / "out", txt_mode=mode)
    got = [r["text"] for r in _ndjson(tmp_path / "out")]
    lines = [l.rstrip("\r") for l in text.split("\n")]
    if mode == "file":
        expected = ["\n".join(text.split("\n"))]
    elif mode == "line":
        expected = [l for l in lines if l.strip()]
    else:
        expected = ["\n".join(p) for p in _paragraphs(lines)]
    assert got == expected


def _paragraphs(lines):
    para = []
    for l in lines:
        if l.strip():
            para.append(l)
        elif para:
            yield para
            para = []
    if para:
        yield para


@pytest.mark.skipif(not arrow_io_available(), reason="Parquet input needs luminamoon._data_io")
def test_parquet_input_with_metadata_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({"id": [f"p{i}" for i in range(25)], "text": [f"row {i}" for i in range(25)],
                      "score": [i / 4 for i in range(25)], "year": pa.array(range(25), pa.int32())})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=4)
    summary = _run([str(tmp_path / "in.parquet")], tmp_path / "out", batch_docs=3)
    assert summary["documents_kept"] == 25
    assert _ndjson(tmp_path / "out") == table.to_pylist()


def test_inputs_dirs_globs_and_file_uris(tmp_path):
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    for name in ("b.jsonl", "a.jsonl", "sub/c.ndjson"):
        write_jsonl(d / name, [{"text": name}])
    (d / "README.md").write_text("not a shard")
    (d / "_state").mkdir()
    expected = [str(d / "a.jsonl"), str(d / "b.jsonl"), str(d / "sub" / "c.ndjson")]
    assert resolve_inputs([str(d)]) == expected
    assert resolve_inputs([str(d / "*.jsonl")]) == expected[:2]
    assert resolve_inputs(["file://" + str(d / "a.jsonl")]) == expected[:1]
    assert resolve_inputs([f"file://{d}/a%2Ejsonl"]) == expected[:1]  # percent-decoded
    with pytest.raises(DataError, match=re.escape("did you mean 'file://'")) as e:
        resolve_inputs(["fiel://" + str(d)])
    assert e.value.exit_code == 2
    for scheme in ("s3", "hf", "gs"):
        with pytest.raises(DataError, match="not supported yet") as e:
            resolve_inputs([f"{scheme}://bucket/x.jsonl"])
        assert e.value.exit_code == 2
    with pytest.raises(DataError, match="not found") as e:
        resolve_inputs([str(d / "missing.jsonl")])
    assert e.value.exit_code == 3


def test_stream_yields_the_kept_documents_in_order(tmp_path):
    src = tmp_path / "s.jsonl"
    write_jsonl(src, [{"id": f"d{i}", "text": f"text {i % 7}", "n": i} for i in range(50)])
    pipeline = FusedPipeline(**dict(RAW, dedup=True, batch_docs=8))
    batches = list(pipeline.stream([str(src)]))
    ids = [i for b in batches for i in b.ids]
    assert ids == [f"d{i}" for i in range(7)]  # exact dedup keeps the first occurrences
    texts = [t for b in batches for t in b.text.to_pylist()]
    assert texts == [f"text {i}" for i in range(7)]
    assert [m["n"] for b in batches for m in b.metadata()] == list(range(7))
    assert sum(b.documents_in for b in batches) == 50
