"""StreamDeduplicator against a Python reference (xxhash + dict), and its .dedup
WAL: clean reopen, a child process SIGKILLed mid-append, damaged blocks,
checkpoint positions, bad input."""
from __future__ import annotations

import random
import signal
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("xxhash")
data = pytest.importorskip("luminamoon.data")
if not hasattr(data, "StreamDeduplicator"):
    pytest.skip("luminamoon built without the dedup stage", allow_module_level=True)

import dedup_reference as ref  # noqa: E402

HEADER_BYTES = 64
BLOCK_HEADER_BYTES = 16


def corpus(n: int, distinct: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pool = [f"Doc {i}: " + " ".join(rng.choice(["alpha", "Beta", "gamma!", "δέλτα", "e\u2019s"])
                                      for _ in range(rng.randint(0, 12))) for i in range(distinct)]
    return [rng.choice(pool) for _ in range(n)]


def reference_decisions(texts, normalized=False, refs=None):
    first: dict[int, int] = {}
    keep, matched = [], []
    for i, t in enumerate(texts):
        key = ref.exact_key(t, normalized)
        r = i if refs is None else refs[i]
        if key in first:
            keep.append(False)
            matched.append(first[key])
        else:
            first[key] = r
            keep.append(True)
            matched.append(-1)
    return keep, matched


@pytest.mark.parametrize("normalized", [False, True])
def test_keep_mask_and_matches_equal_the_reference_across_batches(normalized):
    texts = corpus(3000, 700, seed=1) + ["", "", "HELLO, world", "hello world"]
    expect_keep, expect_matched = reference_decisions(texts, normalized)
    d = data.StreamDeduplicator(normalized=normalized)
    keep, matched = [], []
    for lo in range(0, len(texts), 777):
        k, m = d.add_with_matches(texts[lo : lo + 777])
        assert k.dtype == np.bool_ and m.dtype == np.int64
        keep += k.tolist()
        matched += m.tolist()
    assert keep == expect_keep
    assert matched == expect_matched
    assert len(d) == sum(expect_keep)
    assert d.documents_seen == len(texts)
    assert sorted(d.keys().tolist()) == sorted({ref.exact_key(t, normalized) for t in texts})


@pytest.mark.parametrize("normalized", [False, True])
def test_keys_spilled_to_a_scratch_file_decide_as_the_reference(normalized, tmp_path):
    texts = corpus(6000, 2500, seed=3)
    expect_keep, expect_matched = reference_decisions(texts, normalized)
    d = data.StreamDeduplicator(normalized=normalized, memory_keys=100, spill_dir=tmp_path)
    keep, matched = [], []
    for lo in range(0, len(texts), 333):
        k, m = d.add_with_matches(texts[lo : lo + 333])
        keep += k.tolist()
        matched += m.tolist()
    assert keep == expect_keep
    assert matched == expect_matched
    assert len(d) == sum(expect_keep)
    assert d.spilled_keys >= len(d) - 100
    assert sorted(d.keys().tolist()) == sorted({ref.exact_key(t, normalized) for t in texts})
    assert all(t in d for t in texts[:50])
    assert "a text never added" not in d
    assert list(tmp_path.iterdir()) == []  # the scratch file is unnamed: nothing to leave behind
    with pytest.raises(ValueError):
        data.StreamDeduplicator(memory_keys=-1)


def test_normalized_form_matches_reference():
    samples = ["  Hello,\tWORLD!!  it\u2019s\u00a0me\u2026 ", "A\u3000B\u3001c", "x\xe2y", "", "...",
               "Ünïcode Stays ünïcode", "tabs\tand\nnew\r\nlines"]
    for s in samples:
        assert data.dedup_normalize(s) == ref.normalize(s), s
    assert data.dedup_normalize(b"bad \xe2\x80 utf8\xff") == ref.normalize(b"bad \xe2\x80 utf8\xff")


def test_every_input_kind_gives_the_same_mask():
    pa = pytest.importorskip("pyarrow")
    texts = corpus(500, 120, seed=2)
    expect = reference_decisions(texts)[0]
    for batch in (texts, [t.encode() for t in texts], pa.array(texts), pa.array(texts, pa.large_string()),
                  data.StringTensor(texts)):
        assert data.StreamDeduplicator().add(batch).tolist() == expect


def test_caller_refs_are_reported_for_drops():
    texts = ["a", "b", "a", "b", "c"]
    refs = [100, 205, 300, 401, 512]
    d = data.StreamDeduplicator()
    keep = d.add(texts, refs=refs)
    assert keep.tolist() == [True, True, False, False, True]
    assert d.last_matched.tolist() == [-1, -1, 100, 205, -1]


def test_key_set_stays_within_16_bytes_per_distinct_document():
    d = data.StreamDeduplicator(track_matches=False)
    worst = 0.0
    for lo in range(0, 400_000, 20_000):
        d.add([f"distinct document {i}" for i in range(lo, lo + 20_000)])
        worst = max(worst, d.set_memory_bytes / len(d))
    assert len(d) == 400_000
    assert worst <= 16.0
    assert d.memory_bytes == d.set_memory_bytes
    tracked = data.StreamDeduplicator()
    tracked.add([f"distinct document {i}" for i in range(50_000)])
    assert tracked.set_memory_bytes / len(tracked) <= 16.0
    assert tracked.memory_bytes == 2 * tracked.set_memory_bytes


def test_presized_set_never_grows():
    n = 100_000
    d = data.StreamDeduplicator(expected_distinct=n, track_matches=False)
    start = d.set_memory_bytes
    d.add([f"doc {i}" for i in range(n)])
    assert d.set_memory_bytes == start  # no growth, so no transient second table
    assert d.set_memory_bytes / n <= 10.1  # 8 bytes at load 0.8
    with pytest.raises(ValueError):
        data.StreamDeduplicator(expected_distinct=-1)


def committed_keys(blocks):
    return {ref.exact_key(t) for block in blocks for t in block}


def test_reopen_after_clean_close_holds_exactly_the_committed_keys(tmp_path):
    wal = tmp_path / "x.dedup"
    blocks = [[f"doc-{b}-{i}" for i in range(50)] for b in range(3)]
    with data.StreamDeduplicator(wal) as d:
        for block in blocks:
            d.add(block + block[:5])  # in-batch duplicates are not logged twice
            d.commit()
        d.add(["added but never committed"])
        d.close(commit=False)
    raw = wal.read_bytes()
    assert raw[:8] == b"LMDEDUP1"
    # Little-endian hashes: the first record of the first block is block 0's first key.
    first_key, first_ref = struct.unpack_from("<QQ", raw, HEADER_BYTES + BLOCK_HEADER_BYTES)
    assert first_key == ref.exact_key(blocks[0][0]) and first_ref == 0
    d2 = data.StreamDeduplicator(wal)
    assert set(d2.keys().tolist()) == committed_keys(blocks)
    assert d2.replay_stats["blocks"] == 3 and d2.replay_stats["cut_bytes"] == 0
    keep = d2.add([blocks[1][3], "added but never committed"])
    assert keep.tolist() == [False, True]
    assert d2.last_matched.tolist() == [55 + 3, -1]  # ref (stream ordinal) from the first run


CHILD = textwrap.dedent(
    """
    import os
    import sys
    import luminamoon.data as data
    wal, pause_us, block_docs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    d = data.StreamDeduplicator(wal)
    k = 0
    while True:
        if k == 2 and pause_us:
            # From block 2 on, each block is written in two halves pause_us apart.
            d.close()
            d = data.StreamDeduplicator(wal, _split_write_pause_us=pause_us)
        d.add([f"doc-{k}-{i}" for i in range(block_docs)])
        # The size before this block's commit: the parent waits for growth past it.
        print(f"size {os.path.getsize(wal)}", flush=True)
        print(f"begin {k}", flush=True)
        d.commit()
        print(f"done {k}", flush=True)
        k += 1
    """
)


def spawn_writer(wal, pause_us, block_docs):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(wal), str(pause_us), str(block_docs)],
        stdout=subprocess.PIPE, text=True,
    )


def block_texts(k, block_docs):
    return [f"doc-{k}-{i}" for i in range(block_docs)]


def test_child_killed_in_the_middle_of_a_block_leaves_a_cut_torn_tail(tmp_path):
    wal = tmp_path / "killed.dedup"
    block_docs = 2000
    # Block 2 is written in two halves 5 s apart: the kill lands between them.
    child = spawn_writer(wal, 5_000_000, block_docs)
    try:
        lines = []
        while True:
            line = child.stdout.readline().strip()
            assert line, "writer died early"
            lines.append(line)
            if line == "begin 2":
                break
        committed = int(lines[-2].split()[1])  # measured by the writer before block 2
        deadline = time.monotonic() + 4.0
        while wal.stat().st_size == committed and time.monotonic() < deadline:
            time.sleep(0.01)  # wait for block 2's first half; the writer then sleeps 5 s
        assert wal.stat().st_size > committed, "the first half of block 2 never appeared"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert lines[-3] == "done 1" and lines[-1] == "begin 2"
    torn_size = wal.stat().st_size
    d = data.StreamDeduplicator(wal)
    assert set(d.keys().tolist()) == committed_keys([block_texts(0, block_docs), block_texts(1, block_docs)])
    stats = d.replay_stats
    assert stats["cut_bytes"] > 0, "the half-written block should have been found and cut"
    assert stats["valid_bytes"] + stats["cut_bytes"] == torn_size
    assert wal.stat().st_size == stats["valid_bytes"]


@pytest.mark.parametrize("delay", [0.3, 0.8])
def test_child_killed_at_a_random_moment_keeps_whole_committed_blocks(tmp_path, delay):
    wal = tmp_path / "random.dedup"
    block_docs = 3000
    child = spawn_writer(wal, 0, block_docs)
    try:
        first = [child.stdout.readline().strip() for _ in range(2)]
        assert first[1] == "begin 0", first  # started and writing
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read().split()
    finally:
        child.wait(timeout=30)
    done = [int(v) for w, v in zip(rest[::2], rest[1::2]) if w == "done"]
    last_done = max(done, default=-1)
    d = data.StreamDeduplicator(wal)
    got = set(d.keys().tolist())
    # Every block whose commit returned is there; the one in flight is all or nothing.
    options = [committed_keys([block_texts(k, block_docs) for k in range(last_done + 1 + extra)])
               for extra in (0, 1)]
    assert got in options, f"{len(got)} keys after {last_done + 1} committed blocks"
    assert d.replay_stats["records"] == len(got)


def write_blocks(wal, n_blocks=3, per_block=10):
    positions = []
    blocks = [[f"blk{b}-{i}" for i in range(per_block)] for b in range(n_blocks)]
    d = data.StreamDeduplicator(wal)
    for block in blocks:
        d.add(block)
        d.commit()
        positions.append(d.committed_position)
    d.close()
    return blocks, positions


def flip_byte(path, offset):
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x41
    path.write_bytes(bytes(raw))


def test_damaged_last_block_is_cut_and_damaged_middle_block_is_refused(tmp_path):
    wal = tmp_path / "damaged.dedup"
    blocks, pos = write_blocks(wal)
    flip_byte(wal, pos[1] + BLOCK_HEADER_BYTES + 40)  # a hash inside the last block
    d = data.StreamDeduplicator(wal)
    assert set(d.keys().tolist()) == committed_keys(blocks[:2])
    assert wal.stat().st_size == pos[1]
    d.close()

    wal2 = tmp_path / "middle.dedup"
    blocks, pos = write_blocks(wal2)
    flip_byte(wal2, pos[0] + BLOCK_HEADER_BYTES + 8)  # inside block 1 of 3
    size = wal2.stat().st_size
    with pytest.raises(data.DedupStateCorruptError, match="valid block follows"):
        data.StreamDeduplicator(wal2)
    assert wal2.stat().st_size == size  # committed data untouched

    wal3 = tmp_path / "header.dedup"
    write_blocks(wal3)
    flip_byte(wal3, 20)
    with pytest.raises(data.DedupStateCorruptError, match="header"):
        data.StreamDeduplicator(wal3)


def test_resume_position_replays_up_to_the_checkpoint(tmp_path):
    wal = tmp_path / "resume.dedup"
    blocks, pos = write_blocks(wal)
    d = data.StreamDeduplicator(wal, resume_position=pos[0])
    assert set(d.keys().tolist()) == committed_keys(blocks[:1])
    assert d.replay_stats["cut_bytes"] == pos[2] - pos[0]
    d.close()
    with pytest.raises(data.DedupStateCorruptError, match="not the end of a valid block"):
        data.StreamDeduplicator(wal, resume_position=pos[0] - 3)
    with data.StreamDeduplicator(wal, resume_position=0) as empty:  # nothing committed yet
        assert len(empty) == 0
    with pytest.raises(data.DedupStateCorruptError, match="bytes were committed"):
        data.StreamDeduplicator(wal, resume_position=pos[2] + 100)


def test_bad_arguments_and_files_give_clear_errors(tmp_path):
    wal = tmp_path / "opts.dedup"
    write_blocks(wal)
    with pytest.raises(ValueError, match="other options"):
        data.StreamDeduplicator(wal, normalized=True)
    with pytest.raises(ValueError, match="sync"):
        data.StreamDeduplicator(tmp_path / "y.dedup", sync="sometimes")
    assert not (tmp_path / "y.dedup").exists()
    not_a_wal = tmp_path / "text.dedup"
    not_a_wal.write_bytes(b"hello " * 30)
    with pytest.raises(data.DedupStateCorruptError):
        data.StreamDeduplicator(not_a_wal)
    assert not_a_wal.read_bytes() == b"hello " * 30
    with pytest.raises(OSError):
        data.StreamDeduplicator(tmp_path / "missing-dir" / "x.dedup")
    d = data.StreamDeduplicator()
    with pytest.raises(ValueError, match="refs"):
        d.add(["a", "b"], refs=[1])
    with pytest.raises(ValueError, match=">= 0"):
        d.add(["a", "b"], refs=[1, -2])
    assert len(d) == 0  # a refused batch changes nothing
    with pytest.raises(TypeError):
        d.add("a single string")


def test_one_writer_per_wal(tmp_path):
    wal = tmp_path / "locked.dedup"
    d = data.StreamDeduplicator(wal)
    with pytest.raises(ValueError, match="another process"):
        # flock locks are per open file description: a second open conflicts too.
        data.StreamDeduplicator(wal)
    d.close()
    data.StreamDeduplicator(wal).close()


def test_parallel_hashing_does_not_change_decisions():
    texts = corpus(40_000, 9_000, seed=5)  # > 1 MiB: the threaded path
    a = data.StreamDeduplicator(num_threads=1).add_with_matches(texts)
    b = data.StreamDeduplicator(num_threads=2).add_with_matches(texts)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_key_of_matches_the_reference():
    d = data.StreamDeduplicator()
    n = data.StreamDeduplicator(normalized=True)
    for t in ["", "x", "été", "Mixed, Case!"]:
        assert d.key_of(t) == ref.exact_key(t)
        assert n.key_of(t) == ref.exact_key(t, normalized=True)
        assert t not in d


FULL_DISK_CHILD = textwrap.dedent(
    """
    import resource, signal, sys
    import luminamoon.data as data
    wal = sys.argv[1]
    d = data.StreamDeduplicator(wal)
    d.add([f"small-{i}" for i in range(10)])
    d.commit()
    # The file may not grow past 4 KiB from here on: the next block cannot fit.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    d.add([f"big-{i}" for i in range(1000)])
    try:
        d.commit()
    except OSError as e:
        print("OSError", e)
    print(len(d), d.committed_position)
    """
)


def test_a_failed_append_leaves_no_half_block(tmp_path):
    wal = tmp_path / "full.dedup"
    out = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD, str(wal)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("OSError") and "write" in lines[0]
    size = wal.stat().st_size
    assert size == int(lines[1].split()[1])  # truncated back to the last whole block
    d = data.StreamDeduplicator(wal)
    assert d.replay_stats["cut_bytes"] == 0
    assert set(d.keys().tolist()) == {ref.exact_key(f"small-{i}") for i in range(10)}


def test_normalized_form_matches_reference_across_64_byte_blocks():
    # The normalization runs 64 bytes at a time: separators (ASCII, U+00A0,
    # U+2000..U+206F, U+3000..U+303F) and invalid or partial sequences placed
    # at every offset around a block boundary.
    pieces = [b"a", b"Zq", b" ", b"\t\n", b"--", b"\xc2\xa0", b"\xe2\x80\x94", b"\xe2\x81\xaf", b"\xe2\x81\xb0",
              b"\xe3\x80\x81", b"\xe3\x81\x82", b"\xc3\xa9", b"\xe2\x80", b"\xc2", b"\xff", b"WORD", b"\x7f", b"\x00"]
    rng = random.Random(64)
    for _ in range(400):
        text = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 90)))
        for shift in (0, 1, 61, 62, 63):
            t = b"x" * shift + text
            assert data.dedup_normalize(t) == ref.normalize(t), t
