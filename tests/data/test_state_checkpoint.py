"""The checkpoint files against the spec, read with struct/zlib here (an
independent decoder), and the damaged-state cases: a corrupt slot, both slots
corrupt, a missing WAL, an input shard changed since the checkpoint."""
from __future__ import annotations

import json
import os
import struct
import zlib

import pytest

from luminamoon.data.pipeline import DataError, FusedPipeline
from test_pipeline_support import long_text, read_rows, run_cli, write_jsonl

MAGIC = 0x4B434D4C


def decode_slot(raw: bytes):
    """Spec layout: magic u32, version u16, flags u16, sequence u64, coordinate
    (shard u32, byte_offset u64, row_group u32, page u32, row_in_page u32,
    global_row u64), output position u64, reserved u32, crc32 over bytes 0..59."""
    assert len(raw) == 64
    magic, version, flags, sequence = struct.unpack_from("<IHHQ", raw, 0)
    coordinate = struct.unpack_from("<IQIIIQ", raw, 16)
    (output_position,) = struct.unpack_from("<Q", raw, 48)
    (crc,) = struct.unpack_from("<I", raw, 60)
    valid = magic == MAGIC and version == 1 and crc == zlib.crc32(raw[:60])
    return valid, dict(flags=flags, sequence=sequence, coordinate=coordinate, output=output_position)


def _corpus(tmp_path, docs=120):
    path = tmp_path / "in.jsonl"
    write_jsonl(path, [{"id": f"d{i}", "text": long_text(i)} for i in range(docs)])
    return str(path)


def _pipeline():
    return FusedPipeline(format="ndjson", part_rows=10, batch_docs=10)


def test_meta_file_matches_the_spec(tmp_path):
    src = _corpus(tmp_path)
    out = tmp_path / "out"
    summary = _pipeline().run([src], out, resume=False)
    raw = (out / "_state" / "checkpoint.meta").read_bytes()
    assert len(raw) == 128
    slots = [decode_slot(raw[:64]), decode_slot(raw[64:])]
    assert all(v for v, _ in slots)
    latest = max((s for _, s in slots), key=lambda s: s["sequence"])
    other = min((s for _, s in slots), key=lambda s: s["sequence"])
    assert latest["sequence"] == other["sequence"] + 1  # ping-pong: the other slot holds the previous one
    assert latest["flags"] & 1  # finished
    shard, byte_offset, _, _, lines, global_row = latest["coordinate"]
    assert (shard, byte_offset) == (0, os.path.getsize(src))
    assert lines == 120 and global_row == 120
    assert latest["output"] == summary["parts"] == len(list(out.glob("part-*.ndjson")))


def _run_cli(src, out, *extra):
    return run_cli(["run", src, "-o", str(out), "--format", "ndjson", "--part-rows", "10",
                    "--batch-docs", "10", "--progress", "none", *extra])


def _interrupted_run(tmp_path):
    """A run killed after its 5th checkpoint, and the uninterrupted reference."""
    src = _corpus(tmp_path)
    ref = tmp_path / "ref"
    assert _run_cli(src, ref).returncode == 0
    out = tmp_path / "out"
    r = run_cli(["run", src, "-o", str(out), "--format", "ndjson", "--part-rows", "10", "--batch-docs", "10",
                 "--progress", "none"], env={"LUMINAMOON_TEST_CRASH_AT": "meta_written:5"})
    assert r.returncode == -9
    return src, ref, out


def test_a_corrupt_newest_slot_falls_back_to_the_previous_checkpoint(tmp_path):
    src, ref, out = _interrupted_run(tmp_path)
    meta = out / "_state" / "checkpoint.meta"
    raw = bytearray(meta.read_bytes())
    newest = max((0, 1), key=lambda i: decode_slot(bytes(raw[64 * i:64 * i + 64]))[1]["sequence"])
    raw[64 * newest + 20] ^= 0xFF  # torn coordinate
    meta.write_bytes(bytes(raw))
    r = _run_cli(src, out)
    assert r.returncode == 0, r.stderr
    assert read_rows(str(out)) == read_rows(str(ref))


def test_both_slots_corrupt_is_a_clear_error_not_a_restart(tmp_path):
    src, ref, out = _interrupted_run(tmp_path)
    meta = out / "_state" / "checkpoint.meta"
    raw = bytearray(meta.read_bytes())
    raw[0] ^= 1
    raw[64] ^= 1
    meta.write_bytes(bytes(raw))
    parts_before = sorted(p.name for p in out.glob("part-*"))
    r = _run_cli(src, out)
    assert r.returncode == 4
    assert "both slots are corrupt" in r.stderr
    assert sorted(p.name for p in out.glob("part-*")) == parts_before  # nothing touched
    with pytest.raises(DataError) as e:
        _pipeline().run([src], out, resume=True)
    assert e.value.exit_code == 4


def test_missing_wal_is_reported(tmp_path):
    src, ref, out = _interrupted_run(tmp_path)
    (out / "_state" / "dedup.wal").unlink()
    r = _run_cli(src, out)
    assert r.returncode == 4
    assert "dedup.wal" in r.stderr and "missing" in r.stderr


def test_changed_input_shard_is_detected(tmp_path):
    src, ref, out = _interrupted_run(tmp_path)
    with open(src, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "late", "text": long_text(999)}) + "\n")
    r = _run_cli(src, out)
    assert r.returncode == 5
    assert "changed since the checkpoint" in r.stderr
    # --no-resume starts over and succeeds.
    assert _run_cli(src, out, "--no-resume").returncode == 0


def test_changed_config_is_detected(tmp_path):
    src, ref, out = _interrupted_run(tmp_path)
    r = _run_cli(src, out, "--no-pii")
    assert r.returncode == 5
    assert "configuration differs" in r.stderr


def test_resume_after_completion_is_a_no_op(tmp_path):
    src = _corpus(tmp_path)
    out = tmp_path / "out"
    first = _pipeline().run([src], out, resume=False)
    again = _pipeline().run([src], out, resume=True)
    assert again["documents_kept"] == first["documents_kept"]
    assert again["this_run"]["documents"] == 0


def test_a_second_run_on_the_same_output_is_refused(tmp_path):
    import fcntl
    src = _corpus(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".luminamoon.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a running pipeline holds it
        r = _run_cli(src, out)
        assert r.returncode == 6 and "another run" in r.stderr
    assert _run_cli(src, out).returncode == 0  # released: the next run proceeds
