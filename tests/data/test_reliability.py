"""Issue 16: one bad record never stops a run or corrupts an output. Each test
is the regression test of one defect of the issue (numbered as there); the
expectations are written by hand from the spec (a malformed record is a
counted rejection with shard and line, reading goes on at the next line) and
checked with independent readers (Python's json, pyarrow's validation)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import zlib

import pytest

from luminamoon.data.pipeline import FusedPipeline, arrow_io_available
from test_pipeline_support import part_files, read_rows, run_cli, write_jsonl

RAW = ["--no-clean", "--no-quality", "--no-dedup", "--no-minhash", "--no-pii"]
needs_arrow = pytest.mark.skipif(not arrow_io_available(), reason="needs the Arrow I/O extension")


def _summary(out) -> dict:
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def _strict_json_lines(path) -> list[dict]:
    """Every line of an NDJSON file parsed by Python's json, which (unlike a
    lenient reader) refuses `tru`, `01`, `1.`, NaN and friends."""
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line, parse_constant=refuse))
    return rows


def _lines_of_malformed(out) -> list[int]:
    return sorted(e["line"] for e in _summary(out)["malformed_examples"])


# ---------------------------------------------------------------- defect 1
def test_bad_id_values_are_counted_rejections_and_resume_works(tmp_path):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, ['{"id":"a","text":"first"}', '{"id":=5,"text":"x"}', '{"id":,"text":"x"}',
                      '{"id":"b","text":"last"}'])
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson"] + RAW)
    assert r.returncode == 0, r.stderr
    assert _lines_of_malformed(out) == [2, 3]
    assert [row["text"] for row in read_rows(str(out))] == ["first", "last"]
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson"] + RAW)  # resume
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- defect 2
BAD_TOKENS = ["tru", "nul", "-", "1.", "01", "fals", "+1", ".5", "1e", "NaN", "0x10"]


def test_invalid_json_values_never_reach_the_output(tmp_path):
    src = tmp_path / "in.jsonl"
    lines = ['{"text":"good","n":1}']
    lines += ['{"text":"bad %d","v":%s}' % (i, tok) for i, tok in enumerate(BAD_TOKENS)]
    lines += ['{"text":"nested bad","v":[1,{"a":tru}]}', '{"text":"good too","n":2}']
    write_jsonl(src, lines)
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson"] + RAW)
    assert r.returncode == 0, r.stderr
    rows = [row for p in part_files(str(out)) for row in _strict_json_lines(p)]
    assert [row["text"] for row in rows] == ["good", "good too"]
    assert _lines_of_malformed(out) == list(range(2, 2 + len(BAD_TOKENS) + 1))


# ---------------------------------------------------------------- defect 3
OUT_OF_RANGE = ['18446744073709551616', '123456789012345678901234567890', '1e400', '-1e400',
                '"\\ud800"', '"a\\udc00b"', '[' * 1100 + ']' * 1100]


@needs_arrow
@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_values_the_writers_cannot_represent_are_rejected_by_the_reader(tmp_path, fmt):
    import pyarrow.parquet as pq  # noqa: F401
    src = tmp_path / "in.jsonl"
    lines = ['{"text":"ok","n":18446744073709551615}']  # fits uint64: kept (as a float64 column)
    lines += ['{"text":"bad %d","v":%s}' % (i, v) for i, v in enumerate(OUT_OF_RANGE)]
    lines += ['{"text":"deep but fine","v":%s}' % ('[' * 500 + ']' * 500)]
    write_jsonl(src, lines)
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", fmt] + RAW)
    assert r.returncode == 0, r.stderr
    assert [row["text"] for row in read_rows(str(out))] == ["ok", "deep but fine"]
    assert _lines_of_malformed(out) == list(range(2, 2 + len(OUT_OF_RANGE)))
    r = run_cli(["run", str(src), "-o", str(out), "--format", fmt] + RAW)  # a resume finishes too
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- defect 4
@needs_arrow
@pytest.mark.parametrize("fmt", ["parquet", "ndjson"])
def test_a_duplicate_text_key_is_rejected_and_never_leaks(tmp_path, fmt):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, ['{"text":"clean text","text":"mail bob@example.org now"}',
                      '{"text":"x","te\\u0078t":"escaped duplicate bob@example.org"}',
                      '{"id":"a","text":"y","id":"b"}',
                      '{"text":"kept","n":1}'])
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", fmt, "--no-quality", "--no-dedup",
                 "--no-minhash"])
    assert r.returncode == 0, r.stderr
    rows = read_rows(str(out))  # pyarrow reads the part (one text column)
    assert rows == [{"text": "kept", "n": 1}]
    for path in part_files(str(out)):
        assert b"bob@example.org" not in open(path, "rb").read()
    assert _lines_of_malformed(out) == [1, 2, 3]
    assert all("duplicate key" in e["message"] for e in _summary(out)["malformed_examples"])


# ---------------------------------------------------------------- defect 5
INVALID_UTF8 = b"bad \xff\xfe byte \xed\xa0\x80 surrogate \xc0\xaf overlong"


@needs_arrow
@pytest.mark.parametrize("pii", [False, True])
def test_invalid_utf8_text_without_the_cleaner_is_rejected(tmp_path, pii):
    import pyarrow as pa
    import pyarrow.parquet as pq
    (tmp_path / "a.txt").write_bytes(INVALID_UTF8)
    (tmp_path / "b.txt").write_bytes("valid caf\u00e9".encode())
    text = pa.array([b"good row", INVALID_UTF8], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": text, "id": ["r1", "r2"]}), tmp_path / "c.parquet")
    out = tmp_path / "out"
    flags = [f for f in RAW if f != "--no-pii"] + ([] if pii else ["--no-pii"])
    r = run_cli(["run", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), str(tmp_path / "c.parquet"),
                 "-o", str(out), "--format", "parquet"] + flags)
    assert r.returncode == 0, r.stderr
    for path in part_files(str(out)):
        pq.read_table(path).validate(full=True)  # Arrow's own UTF-8 validation
    assert sorted(row["text"] for row in read_rows(str(out))) == ["good row", "valid caf\u00e9"]
    assert _summary(out)["records_malformed"] == 2
    # With the cleaner on, the same bytes are repaired (U+FFFD), not rejected.
    out2 = tmp_path / "out2"
    r = run_cli(["run", str(tmp_path / "a.txt"), "-o", str(out2), "--format", "parquet",
                 "--no-quality", "--no-dedup", "--no-minhash", "--no-pii"])
    assert r.returncode == 0, r.stderr
    assert "\ufffd" in read_rows(str(out2))[0]["text"]


# ---------------------------------------------------------------- defect 6
def test_a_commit_record_without_totals_is_corrupt_state(tmp_path):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"text": f"doc {i}"} for i in range(6)])
    out = tmp_path / "out"
    args = ["run", str(src), "-o", str(out), "--format", "ndjson", "--part-rows", "2"] + RAW
    assert run_cli(args).returncode == 0
    record_path = out / "_state" / "commit-00000000.json"
    record = json.loads(record_path.read_text())
    del record["totals"]
    record_path.write_text(json.dumps(record))
    r = run_cli(args)
    assert r.returncode == 4, r.stderr
    assert "totals" in r.stderr


# ---------------------------------------------------------------- defect 7
def _long_line_gzip(path, line_bytes: int, before=(), after=(), newline=False, close=False):
    """A small .jsonl.gz whose decompressed form holds one line of line_bytes
    bytes (a JSON string that never ends, unless close), written in chunks."""
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for line in before:
            f.write(z.compress((line + "\n").encode()))
        f.write(z.compress(b'{"text":"'))
        chunk = b"a" * (1 << 20)
        left = line_bytes - 9 - (2 if close else 0)
        while left > 0:
            f.write(z.compress(chunk[:min(left, len(chunk))]))
            left -= len(chunk)
        if close:
            f.write(z.compress(b'"}'))
        if newline:
            f.write(z.compress(b"\n"))
        for line in after:
            f.write(z.compress((line + "\n").encode()))
        f.write(z.flush())


# The child's own peak: VmHWM of its address space. (getrusage's ru_maxrss would not do: Linux
# carries the forking parent's high-water mark across exec into it, so a child of a pytest process
# that has grown to a gigabyte reads a gigabyte.)
_PEAK_RSS = textwrap.dedent("""
    import json, sys
    from luminamoon.data.pipeline import FusedPipeline
    config = json.loads(sys.argv[3])
    summary = FusedPipeline(**config).run([sys.argv[1]], sys.argv[2], resume=False)
    with open("/proc/self/status") as status:
        peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(json.dumps({"peak_mb": peak_kb / 1024, "summary": summary}))
""")


def _run_measured(src, out, **config):
    settings = dict(clean=False, quality=False, dedup=False, minhash=False, pii=False, format="ndjson")
    settings.update(config)
    r = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(src), str(out), json.dumps(settings)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_huge_line_without_newline_keeps_memory_bounded(tmp_path):
    # 512 MiB in one line (about 0.5 MB gzipped): 3x that before the fix.
    src = tmp_path / "huge.jsonl.gz"
    _long_line_gzip(src, 512 << 20, before=['{"text":"before"}'])
    assert os.path.getsize(src) < 4 << 20
    result = _run_measured(src, tmp_path / "out")  # the default limit, 64 MiB
    assert result["peak_mb"] < 400, result["peak_mb"]
    summary = result["summary"]
    assert summary["documents_kept"] == 1 and summary["records_malformed"] == 1
    bad = summary["malformed_examples"][0]
    assert bad["line"] == 2 and "exceeds max_record_bytes (67108864)" in bad["message"]


def test_reading_goes_on_after_an_over_long_line(tmp_path):
    src = tmp_path / "long.jsonl.gz"
    _long_line_gzip(src, 3 << 20, before=['{"text":"one"}'], after=['{"text":"three"}', '{"text":"four"}'],
                    newline=True, close=True)
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson", "--max-record-bytes",
                 str(1 << 20)] + RAW)
    assert r.returncode == 0, r.stderr
    assert [row["text"] for row in read_rows(str(out))] == ["one", "three", "four"]
    assert _lines_of_malformed(out) == [2]
    # The config key does the same; a limit above the line keeps it.
    (tmp_path / "c.toml").write_text("[reader]\nmax_record_bytes = %d\n" % (4 << 20))
    r = run_cli(["run", str(src), "-o", str(tmp_path / "out2"), "--format", "ndjson",
                 "--config", str(tmp_path / "c.toml")] + RAW)
    assert r.returncode == 0, r.stderr
    assert _summary(tmp_path / "out2")["documents_kept"] == 4


@pytest.mark.parametrize("mode", ["file", "line", "paragraph"])
def test_txt_records_over_the_limit_are_rejected(tmp_path, mode):
    (tmp_path / "a.txt").write_text("short one\n\n" + "x" * 5000 + "\n\nshort two\n")
    out = tmp_path / "out"
    r = run_cli(["run", str(tmp_path / "a.txt"), "-o", str(out), "--format", "ndjson", "--txt-mode", mode,
                 "--max-record-bytes", "1000"] + RAW)
    assert r.returncode == 0, r.stderr
    texts = [row["text"] for row in read_rows(str(out))]
    assert texts == ([] if mode == "file" else ["short one", "short two"])
    assert _lines_of_malformed(out) == ([1] if mode == "file" else [3])


# ---------------------------------------------------------------- defect 8
def test_file_names_that_are_not_utf8(tmp_path):
    base = os.fsencode(tmp_path)
    src = base + b"/caf\xe9.jsonl"
    with open(src, "wb") as f:
        f.write(b'{"text":"hello"}\n{"broken\n')
    txt = base + b"/t\xff.txt"
    with open(txt, "wb") as f:
        f.write(b"plain text")
    out = base + b"/out\xfe"
    r = subprocess.run([sys.executable, "-m", "luminamoon.data.cli", "run", src, txt, b"-o", out,
                        b"--format", b"ndjson", b"--write-dropped"] + [a.encode() for a in RAW],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [row for p in part_files(os.fsdecode(out)) for row in _strict_json_lines(p)]
    assert [row["text"] for row in rows] == ["hello", "plain text"]
    # resume works too (the manifest's paths are compared as stored)
    r = subprocess.run([sys.executable, "-m", "luminamoon.data.cli", "run", src, txt, b"-o", out,
                        b"--format", b"ndjson", b"--write-dropped"] + [a.encode() for a in RAW],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    batches = list(FusedPipeline(clean=False, quality=False, dedup=False, minhash=False, pii=False)
                   .stream([os.fsdecode(txt)]))
    assert batches[0].ids == ["t\ufffd.txt"] and batches[0].shard == os.fsdecode(txt)


@needs_arrow
def test_stream_over_parquet_with_a_non_utf8_id(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    ids = pa.array([b"ok", b"bad\xff"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": ["one", "two"], "id": ids}), tmp_path / "in.parquet")
    batches = list(FusedPipeline(clean=False, quality=False, dedup=False, minhash=False, pii=False)
                   .stream([str(tmp_path / "in.parquet")]))
    assert [i for b in batches for i in b.ids] == ["ok", "bad\ufffd"]


# ---------------------------------------------------------------- --strict
def test_strict_fails_on_a_rejected_record_and_commits_nothing_more(tmp_path):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"text": f"doc {i}"} for i in range(4)] + ['{"text": broken'] +
                [{"text": f"doc {i}"} for i in range(4, 8)])
    out = tmp_path / "out"
    args = ["run", str(src), "-o", str(out), "--format", "ndjson", "--part-rows", "2",
            "--batch-docs", "2"] + RAW
    r = run_cli(args + ["--strict"])
    assert r.returncode == 3, r.stderr
    assert "in.jsonl:5" in r.stderr and "strict" in r.stderr
    # the two parts before the bad batch were committed, nothing after them
    assert [row["text"] for row in read_rows(str(out))] == [f"doc {i}" for i in range(4)]
    assert not (out / "summary.json").exists()
    r = run_cli(args + ["--strict"])  # resuming strict fails at the same record
    assert r.returncode == 3
    (tmp_path / "s.toml").write_text("[runtime]\nstrict = false\n")
    r = run_cli(args + ["--config", str(tmp_path / "s.toml")])  # without it the run finishes
    assert r.returncode == 0, r.stderr
    assert len(read_rows(str(out))) == 8
    (tmp_path / "t.toml").write_text("[runtime]\nstrict = true\n")
    r = run_cli(args + ["--no-resume", "--config", str(tmp_path / "t.toml")])
    assert r.returncode == 3


# ---------------------------------------------------------------- defect 9
def test_a_damaged_gzip_shard_is_printed_and_exits_non_zero(tmp_path):
    records = [{"text": f"document number {i}"} for i in range(3000)]
    data = bytearray(gzip.compress(("\n".join(json.dumps(r) for r in records) + "\n").encode()))
    data[-8] ^= 0xFF  # the CRC-32 in the trailer
    src = tmp_path / "bad.jsonl.gz"
    src.write_bytes(bytes(data))
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson"] + RAW)
    assert r.returncode == 3, r.stderr
    assert "bad.jsonl.gz" in r.stderr and "cannot be decoded" in r.stderr
    summary = _summary(out)
    assert summary["shards_damaged"][0]["shard"] == str(src)
    # the bytes decoded before the damage are kept (here: every document)
    assert summary["documents_kept"] == 3000
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson", "--strict"] + RAW + ["--no-resume"])
    assert r.returncode == 3 and "strict" in r.stderr


def test_a_fifo_is_named_as_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    r = run_cli(["run", str(fifo), "-o", str(tmp_path / "out"), "--format", "ndjson"] + RAW)
    assert r.returncode == 3
    assert "FIFO" in r.stderr and "not found" not in r.stderr
    r = run_cli(["run", "/dev/null", "-o", str(tmp_path / "out"), "--format", "ndjson"] + RAW)
    assert r.returncode in (2, 3) and "not found" not in r.stderr


def test_the_output_directory_as_an_input_is_refused_before_anything_is_deleted(tmp_path):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"text": "a"}, {"text": "b"}])
    out = tmp_path / "out"
    assert run_cli(["run", str(src), "-o", str(out), "--format", "ndjson"] + RAW).returncode == 0
    before = sorted(os.listdir(out))
    r = run_cli(["run", str(out), "-o", str(out), "--format", "ndjson", "--no-resume"] + RAW)
    assert r.returncode == 2, r.stderr
    assert "inside the output directory" in r.stderr
    assert sorted(os.listdir(out)) == before
    assert [row["text"] for row in read_rows(str(out))] == ["a", "b"]


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip"])
def test_resume_verifies_the_committed_part_files(tmp_path, damage):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"text": f"document {i}"} for i in range(6)])
    out = tmp_path / "out"
    args = ["run", str(src), "-o", str(out), "--format", "ndjson", "--part-rows", "2", "--batch-docs", "2",
            "--write-dropped"] + RAW
    assert run_cli(args).returncode == 0
    part = part_files(str(out))[1]
    data = open(part, "rb").read()
    if damage == "delete":
        os.remove(part)
    elif damage == "truncate":
        open(part, "wb").write(data[:-3])
    else:
        open(part, "wb").write(data[:5] + bytes([data[5] ^ 1]) + data[6:])
    r = run_cli(args)
    assert r.returncode == 4, r.stderr
    assert os.path.basename(part) in r.stderr and "--no-resume" in r.stderr
    assert run_cli(args + ["--no-resume"]).returncode == 0


@needs_arrow
def test_rows_after_an_undecodable_row_group_keep_their_row_numbers(tmp_path):
    # Found by fuzz_parquet_reader: two row groups of one row each, the first
    # one damaged. The good row is row 2 of the file, in a run as in a resume
    # (which counts the skipped groups' rows from the footer).
    here = os.path.dirname(os.path.abspath(__file__))
    data = open(os.path.join(here, "..", "..", "fuzz", "regressions", "fuzz_parquet_reader",
                             "undecodable_row_group_line_numbers"), "rb").read()[1:]  # minus the settings byte
    src = tmp_path / "g.parquet"
    src.write_bytes(data)
    batches = list(FusedPipeline(clean=False, quality=False, dedup=False, minhash=False, pii=False)
                   .stream([str(src)]))
    assert [i for b in batches for i in b.ids] == ["g.parquet:2"]
    out = tmp_path / "out"
    r = run_cli(["run", str(src), "-o", str(out), "--format", "ndjson", "--write-dropped"] + RAW)
    assert r.returncode == 3  # a damaged row group: printed, exit 3
    assert _summary(out)["shards_damaged"][0]["line"] == 1
