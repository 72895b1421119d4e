"""The tokenization stage: tokens equal `tokenizers` called directly, shards parsed by hand from the
documented layout, Megatron's own reader, SIGKILL mid-write resumes to identical files, bad input."""
from __future__ import annotations

import gzip
import json
import os
import signal
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers")
from luminamoon import _native  # noqa: E402
from luminamoon.data import DataError, tokenize_corpus, train_bpe_tokenizer  # noqa: E402

if not hasattr(_native, "_TokenShardWriter"):
    pytest.skip("built without token shards", allow_module_level=True)

CORPUS = Path(__file__).resolve().parents[2] / "python" / "luminamoon" / "demo_corpus"


def demo_texts(limit=None):
    texts = []
    for shard in sorted(CORPUS.glob("*.jsonl.gz")):
        with gzip.open(shard, "rt", encoding="utf-8") as f:
            for line in f:
                try:
                    texts.append(json.loads(line)["text"])
                except (ValueError, KeyError, TypeError):
                    pass  # the demo corpus plants malformed lines on purpose
    return texts[:limit]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    texts = demo_texts(600)
    tok_path = root / "tokenizer.json"
    train_bpe_tokenizer(texts, vocab_size=600, path=tok_path)
    corpus = root / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": str(i), "text": t}) + "\n")
    return root, tok_path, corpus, texts


def parse_shard(path):
    """The documents of one shard, from the layout in docs/token-shards.md (not our reader)."""
    raw = Path(path).read_bytes()
    magic, version, tb, docs, toks, t_off, o_off, crc = struct.unpack_from("<8sIIQQQQI", raw, 0)
    assert magic == b"LMTOKSH\0" and version == 1 and t_off == 64
    assert struct.unpack_from("<I", raw, 60)[0] == zlib.crc32(raw[:60])
    assert crc == zlib.crc32(raw[64:])
    ids = np.frombuffer(raw, dtype="<u2" if tb == 2 else "<u4", count=toks, offset=64)
    off = np.frombuffer(raw, dtype="<u8", count=docs + 1, offset=o_off)
    return [ids[off[d]:off[d + 1]].tolist() for d in range(docs)]


def shard_docs(out):
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    docs = []
    for entry in manifest["shards"]:
        docs += parse_shard(Path(out) / entry["file"])
    return docs, manifest


def test_tokens_equal_the_library_called_directly_and_megatron_reads_them(setup, tmp_path):
    root, tok_path, corpus, texts = setup
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tok_path))
    eos = tok.token_to_id("<|endoftext|>")
    summary = tokenize_corpus(corpus, tmp_path / "out", tok_path, shard_max_tokens=5000)
    expected = [e.ids + [eos] for e in tok.encode_batch(texts)]
    docs, manifest = shard_docs(tmp_path / "out")
    assert docs == expected
    assert summary["shards"] == len(manifest["shards"]) > 3
    assert manifest["tokens"] == sum(map(len, expected)) and manifest["metadata"]["eos_id"] == eos
    for entry in manifest["shards"]:  # shards end at the first document past the limit
        assert entry["tokens"] >= 5000 or entry is manifest["shards"][-1]

    from megatron.core.datasets.indexed_dataset import IndexedDataset
    ds = IndexedDataset(str(tmp_path / "out" / "megatron" / "corpus"))
    assert len(ds) == len(expected)
    for i in (0, 1, len(expected) // 2, len(expected) - 1):
        assert ds[i].tolist() == expected[i]
    assert [ds[i].tolist() for i in range(len(ds))] == expected


def _child(corpus, out, tok_path, crash_at):
    code = ("import sys; from luminamoon.data import tokenize_corpus;"
            "tokenize_corpus(sys.argv[1], sys.argv[2], sys.argv[3], shard_max_tokens=3000, batch_docs=37)")
    env = dict(os.environ, LUMINAMOON_TEST_CRASH_AT=crash_at)
    return subprocess.run([sys.executable, "-c", code, str(corpus), str(out), str(tok_path)], env=env,
                          capture_output=True, text=True, timeout=120)


def _files(out):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(Path(out).rglob("*")) if p.is_file()}


def test_sigkill_while_shards_are_written_resumes_to_identical_files(setup, tmp_path):
    root, tok_path, corpus, _ = setup
    clean = tmp_path / "clean"
    tokenize_corpus(corpus, clean, tok_path, shard_max_tokens=3000, batch_docs=37)
    want = _files(clean)
    # Phases: a shard or manifest fsynced under its temporary name, a shard renamed before the
    # manifest and the checkpoint; several kills in a row on the same directory.
    out = tmp_path / "crashed"
    for crash_at in ("file_synced:2", "part_renamed:1", "file_synced:5", "part_renamed:3"):
        r = _child(corpus, out, tok_path, crash_at)
        assert r.returncode == -signal.SIGKILL, r.stderr
    r = _child(corpus, out, tok_path, "none:0")
    assert r.returncode == 0, r.stderr
    got = _files(out)
    assert got.keys() == want.keys()
    for name in want:
        if name != "tokenize.json":  # records absolute input paths: the same here
            assert got[name] == want[name], name


def test_bad_tokenizer_and_changed_settings_are_clear_errors(setup, tmp_path):
    root, tok_path, corpus, _ = setup
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.0", "model": {"type": "NoSuchModel"}')
    with pytest.raises(DataError, match="cannot parse tokenizer file") as e:
        tokenize_corpus(corpus, tmp_path / "o1", bad)
    assert e.value.exit_code == 3
    with pytest.raises(DataError, match="not found"):
        tokenize_corpus(corpus, tmp_path / "o1", tmp_path / "missing.json")
    with pytest.raises(DataError, match="no end-of-document token") as e:
        tokenize_corpus(corpus, tmp_path / "o1", tok_path, eos_token="<eos>")
    assert e.value.exit_code == 2
    assert not (tmp_path / "o1" / "manifest.json").exists()
    # A resume with another tokenizer is refused, the committed shards untouched.
    out = tmp_path / "o2"
    r = _child(corpus, out, tok_path, "part_renamed:2")
    assert r.returncode == -signal.SIGKILL
    before = _files(out)
    other = tmp_path / "other.json"
    train_bpe_tokenizer(demo_texts(100), vocab_size=300, path=other)
    with pytest.raises(DataError, match="other settings") as e:
        tokenize_corpus(corpus, out, other)
    assert e.value.exit_code == 5
    assert _files(out) == before


def test_cli_run_with_tokenizer(setup, tmp_path):
    root, tok_path, corpus, texts = setup
    from luminamoon.data.cli import main
    out = tmp_path / "run"
    assert main(["run", str(corpus), "-o", str(out), "--format", "ndjson", "--tokenizer", str(tok_path),
                 "--progress", "none"]) == 0
    kept = [json.loads(line)["text"] for p in sorted(out.glob("part-*.ndjson")) for line in p.open()]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tok_path))
    eos = tok.token_to_id("<|endoftext|>")
    docs, _ = shard_docs(out / "tokens")
    assert 0 < len(kept) < len(texts)  # the pipeline dropped some
    assert docs == [e.ids + [eos] for e in tok.encode_batch(kept)]


def test_demo_streams_packed_batches_into_the_model(tmp_path, capsys):
    pytest.importorskip("torch")
    from luminamoon.data.cli import run_demo
    from luminamoon.demo import train_on_packed_batches
    assert run_demo(str(tmp_path / "clean")) == 0
    result = train_on_packed_batches(str(tmp_path / "clean"), steps=30)
    assert result["exact_resume"]
    assert sum(result["losses"][-5:]) < sum(result["losses"][:5])  # the model learns from the stream
    assert "packed tokens" in capsys.readouterr().out
