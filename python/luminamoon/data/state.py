"""StateTracker: the data engine's crash-safe dual-slot .meta checkpoint, for a user's own loop.

The 128-byte file of the spec ("Checkpoint and resume"): two 64-byte slots
with a sequence number and a CRC32 each; ``commit`` writes the slot not
holding the latest checkpoint and fsyncs it, ``load`` returns the valid slot
with the highest sequence (a torn slot is ignored; both corrupt is a
DataError, exit code 4, never a silent restart). The FusedPipeline and the
tokenization stage use the same class in C++.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from .pipeline import DataError

__all__ = ["StateTracker", "COORDINATE_FIELDS"]

#: The StreamCoordinate's fields (32 bytes little-endian in each slot).
COORDINATE_FIELDS = ("shard_id", "byte_offset", "row_group_idx", "page_idx", "row_offset_in_page",
                     "global_row_idx")

_FIELD_BITS = {"shard_id": 32, "byte_offset": 64, "row_group_idx": 32, "page_idx": 32, "row_offset_in_page": 32,
               "global_row_idx": 64}


class StateTracker:
    """Open, read and commit a .meta checkpoint.

    ``load()`` -> None (no file: a fresh run) or a dict with ``sequence``,
    ``flags``, ``finished``, ``coordinate`` (a dict of COORDINATE_FIELDS) and
    ``output_position`` (what the caller has committed, e.g. parts written).
    ``commit(coordinate, output_position, finished=False, flags=0)`` records
    the next checkpoint durably; coordinate fields left out are 0."""

    def __init__(self, path: Any) -> None:
        from .. import _native
        if not hasattr(_native, "_StateTracker"):
            raise DataError("this build of luminamoon has no StateTracker (built without zlib)", 7)
        self.path = os.fspath(path)
        self._native = _native._StateTracker(self.path)
        self._finished_flag = int(_native._CHECKPOINT_FINISHED)
        self._loaded = False

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def load(self) -> Optional[dict]:
        self._loaded = True
        return self._native.load()

    @property
    def latest(self) -> Optional[dict]:
        return self._native.latest

    @property
    def invalid_slots_at_load(self) -> int:
        return int(self._native.invalid_slots_at_load)

    def commit(self, coordinate: Optional[dict] = None, output_position: int = 0, *, finished: bool = False,
               flags: int = 0) -> dict:
        if not self._loaded:
            self.load()  # never overwrite a checkpoint this object has not read
        coordinate = dict(coordinate or {})
        unknown = [k for k in coordinate if k not in COORDINATE_FIELDS]
        if unknown:
            from .pipeline import _suggestion
            raise DataError(f"unknown coordinate field '{unknown[0]}'" + _suggestion(unknown[0], COORDINATE_FIELDS), 2)
        for k, v in list(coordinate.items()) + [("output_position", output_position)]:
            bits = _FIELD_BITS.get(k, 64)
            if not 0 <= int(v) < 1 << bits:
                raise DataError(f"{k} must be in [0, 2**{bits}), not {v}", 2)
        if finished:
            flags |= self._finished_flag
        if not 0 <= int(flags) < 1 << 16:
            raise DataError(f"flags must be in [0, 2**16), not {flags}", 2)
        return self._native.commit({k: int(v) for k, v in coordinate.items()}, int(output_position), int(flags))

    def __repr__(self) -> str:
        return f"StateTracker({self.path!r}, latest={self.latest!r})"
