"""StateTracker from Python (seed 002's bridge): commits read back with the spec's layout by an
independent decoder (struct/zlib), ping-pong slots, a torn slot, both slots corrupt, bad input."""
from __future__ import annotations

import pytest

from luminamoon.data import DataError, StateTracker
from test_state_checkpoint import decode_slot


def test_commit_writes_the_spec_layout_alternating_slots(tmp_path):
    path = tmp_path / "loop.meta"
    t = StateTracker(path)
    assert t.load() is None  # a fresh run
    t.commit({"shard_id": 3, "byte_offset": 1 << 40, "global_row_idx": 77}, output_position=5)
    t.commit({"shard_id": 4, "row_group_idx": 2, "page_idx": 9, "row_offset_in_page": 11}, 6, finished=True)
    raw = path.read_bytes()
    assert len(raw) == 128
    a, b = decode_slot(raw[:64]), decode_slot(raw[64:])
    assert a == (True, dict(flags=0, sequence=1, coordinate=(3, 1 << 40, 0, 0, 0, 77), output=5))
    assert b == (True, dict(flags=1, sequence=2, coordinate=(4, 0, 2, 9, 11, 0), output=6))
    cp = StateTracker(path).load()
    assert cp["sequence"] == 2 and cp["finished"] and cp["output_position"] == 6
    assert cp["coordinate"]["page_idx"] == 9 and cp["coordinate"]["byte_offset"] == 0


def test_a_torn_newest_slot_falls_back_and_both_corrupt_is_an_error(tmp_path):
    path = tmp_path / "loop.meta"
    t = StateTracker(path)
    t.commit({"global_row_idx": 10}, 1)
    t.commit({"global_row_idx": 20}, 2)  # slot B
    raw = bytearray(path.read_bytes())
    raw[64 + 20] ^= 0xFF
    path.write_bytes(bytes(raw))
    again = StateTracker(path)
    assert again.load()["coordinate"]["global_row_idx"] == 10
    assert again.invalid_slots_at_load == 1
    # The next commit overwrites the torn slot, not the good one.
    again.commit({"global_row_idx": 30}, 3)
    assert decode_slot(path.read_bytes()[:64])[0] and StateTracker(path).load()["sequence"] == 2
    raw = bytearray(path.read_bytes())
    raw[5] ^= 0xFF
    raw[64 + 5] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="both slots are corrupt") as e:
        StateTracker(path).load()
    assert e.value.exit_code == 4


def test_bad_input_is_a_clear_error(tmp_path):
    t = StateTracker(tmp_path / "x.meta")
    with pytest.raises(DataError, match="did you mean 'shard_id'"):
        t.commit({"shard_idx": 1}, 0)
    with pytest.raises(DataError, match=r"shard_id must be in \[0, 2\*\*32\)"):
        t.commit({"shard_id": 1 << 32}, 0)
    with pytest.raises(DataError, match="output_position"):
        t.commit({}, -1)
    assert not (tmp_path / "x.meta").exists()  # nothing written
    (tmp_path / "short.meta").write_bytes(b"\0" * 100)
    with pytest.raises(DataError, match="100 bytes") as e:
        StateTracker(tmp_path / "short.meta").load()
    assert e.value.exit_code == 4
