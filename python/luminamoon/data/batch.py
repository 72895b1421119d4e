"""Batch stages of the data engine: clean_batch, filter_quality, mask_pii and StringTensor.

Thin front end over luminamoon._native (C++: TextCleaner, QualityFilter,
PIIMasker, StringTensor); the native work runs without the GIL.
"""
from __future__ import annotations

import atexit
import difflib
from dataclasses import dataclass
from typing import Any, Iterable, Optional

import numpy as np

from .. import _native

__all__ = [
    "StringTensor",
    "QualityResult",
    "clean_batch",
    "filter_quality",
    "mask_pii",
    "quality_checks",
    "PII_TYPES",
    "INVALID_UTF8_POLICIES",
    "CLEAN_REASONS",
    "set_num_threads",
    "get_num_threads",
]

INVALID_UTF8_POLICIES = ("replace", "drop", "error")
# Status codes of clean_batch(..., with_reasons=True), by position.
CLEAN_REASONS = (None, "empty", "invalid_utf8")
PII_TYPES: tuple[str, ...] = tuple(_native.pii_type_names()) if hasattr(_native, "pii_type_names") else ()


def set_num_threads(num_threads: int) -> None:
    """Threads of the data stages; 0 restores the default (LUMINAMOON_NUM_THREADS or every core)."""
    if not isinstance(num_threads, int) or num_threads < 0:
        raise ValueError(f"num_threads must be an int >= 0, got {num_threads!r}")
    _native.data_set_num_threads(num_threads)


def get_num_threads() -> int:
    return _native.data_get_num_threads()


class StringTensor:
    """An immutable batch of strings: flat bytes + int64 offsets (Arrow large_string)
    and, on demand, 16-byte Arrow Utf8View slots over the same bytes.

    Built from a list/tuple of ``str``/``bytes``, any object exporting an Arrow
    string array (``__arrow_c_array__``), a pyarrow ChunkedArray, or another
    StringTensor. Exports zero-copy through ``__arrow_c_array__`` /
    ``__arrow_c_stream__`` and DLPack (``to_numpy`` / ``to_torch``).
    """

    __slots__ = ("_t",)

    def __init__(self, items: Any = ()) -> None:
        self._t = _to_native(items)

    @classmethod
    def _wrap(cls, native: Any) -> "StringTensor":
        obj = cls.__new__(cls)
        obj._t = native
        return obj

    def __len__(self) -> int:
        return len(self._t)

    def __getitem__(self, i: int) -> str:
        if isinstance(i, slice):
            return [self._t.get_str(j) for j in range(*i.indices(len(self)))]
        n = len(self._t)
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"StringTensor indices must be integers, not {type(i).__name__}")
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"index {i} out of range for StringTensor of length {n}")
        return self._t.get_str(j)

    def get_bytes(self, i: int) -> bytes:
        n = len(self._t)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"index {i} out of range for StringTensor of length {n}")
        return self._t.get_bytes(j)

    def __iter__(self):
        return iter(self.to_pylist())

    def __repr__(self) -> str:
        head = self.to_pylist()[:3] if len(self) <= 3 else [self[0], self[1], "..."]
        return f"StringTensor(len={len(self)}, nbytes={self.nbytes}, {head!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringTensor):
            return self.to_pylist() == other.to_pylist()
        if isinstance(other, list):
            return self.to_pylist() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        return self._t.nbytes

    def to_pylist(self) -> list[str]:
        return self._t.to_pylist()

    def to_numpy(self) -> tuple[np.ndarray, np.ndarray]:
        """(bytes uint8, offsets int64), sharing the tensor's memory (read-only)."""
        data, offsets = self._t.flat_numpy()
        data.flags.writeable = False
        offsets.flags.writeable = False
        return data, offsets

    def to_torch(self):
        """(bytes torch.uint8, offsets torch.int64) through DLPack, sharing memory."""
        return self._t.flat_torch()

    def offsets_u32(self) -> np.ndarray:
        """uint32 offsets from 0 (a copy), for GPU upload of batches under 4 GiB."""
        return self._t.offsets_u32()

    def views(self) -> np.ndarray:
        """The Arrow Utf8View slots as an (n, 16) uint8 array."""
        return self._t.views()

    def argsort(self) -> np.ndarray:
        """Indices that sort the strings bytewise (view comparisons, prefix first)."""
        return self._t.argsort()

    def __arrow_c_array__(self, requested_schema: Any = None):
        return self._t.arrow_array_capsules(_export_format(requested_schema))

    def __arrow_c_stream__(self, requested_schema: Any = None):
        return self._t.arrow_stream_capsule(_export_format(requested_schema))

    def to_arrow(self, type: str = "large_string"):
        """A pyarrow array over the same bytes: large_string, string (offsets converted) or string_view."""
        import pyarrow as pa

        fmt = {"large_string": "U", "string": "u", "string_view": "vu"}.get(type)
        if fmt is None:
            raise ValueError(f"type must be 'large_string', 'string' or 'string_view', got {type!r}")
        schema, array = self._t.arrow_array_capsules(fmt)
        return pa.Array._import_from_c_capsule(schema, array)


def _export_format(requested_schema: Any) -> str:
    """The Arrow format to export: the requested one when it is a layout we hold
    (large_string "U", string "u", string_view "vu"), else large_string (the
    PyCapsule protocol makes the request a hint)."""
    if requested_schema is not None:
        wanted = _native._arrow_schema_format(requested_schema)
        if wanted in ("U", "u", "vu"):
            return wanted
    return "U"


def _to_native(items: Any):
    if isinstance(items, StringTensor):
        return items._t
    if isinstance(items, (list, tuple)):
        return _native._StringTensor.from_sequence(items)
    if hasattr(items, "__arrow_c_array__"):
        schema, array = items.__arrow_c_array__()
        return _native._StringTensor.from_arrow(schema, array)
    if hasattr(items, "combine_chunks"):  # pyarrow.ChunkedArray
        return _to_native(items.combine_chunks())
    if isinstance(items, (str, bytes)):
        raise TypeError("expected a sequence of texts, got a single str/bytes; wrap it in a list")
    if isinstance(items, Iterable):
        return _native._StringTensor.from_sequence(list(items))
    raise TypeError(f"cannot build a StringTensor from {type(items).__name__}")


def _as_tensor(texts: Any) -> Any:
    return texts._t if isinstance(texts, StringTensor) else _to_native(texts)


def clean_batch(texts: Any, invalid_utf8: str = "replace", *, with_reasons: bool = False):
    """TextCleaner over a batch: same length; a dropped document is the empty string.

    invalid_utf8: "replace" (U+FFFD per maximal subpart), "drop" or "error"
    (ValueError naming the document). with_reasons=True also returns a list of
    drop reasons (None, "empty", "invalid_utf8").
    """
    if invalid_utf8 not in INVALID_UTF8_POLICIES:
        raise ValueError(
            f"invalid_utf8 must be one of {INVALID_UTF8_POLICIES}, got {invalid_utf8!r}"
            + _suggest(str(invalid_utf8), INVALID_UTF8_POLICIES)
        )
    out, status = _native.clean_batch(_as_tensor(texts), invalid_utf8)
    tensor = StringTensor._wrap(out)
    if with_reasons:
        return tensor, [CLEAN_REASONS[s] for s in status.tolist()]
    return tensor


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def quality_checks() -> list[tuple[str, str, bool, float]]:
    """Every check in evaluation order: (threshold name, metric, is_minimum, default bound)."""
    return [tuple(c) for c in _native.quality_checks()]


@dataclass
class QualityResult:
    """Outcome of filter_quality: keep flags, first failing check per document, metric columns."""

    keep: np.ndarray
    reason: list[Optional[str]]
    metrics: Any  # pyarrow.Table, or None when filter_quality(..., metrics=False)

    def __len__(self) -> int:
        return len(self.keep)


def filter_quality(texts: Any, *, metrics: bool = True, **thresholds: Optional[float]) -> QualityResult:
    """Entropy + Gopher quality + Gopher repetition metrics, then the thresholds.

    Each keyword is a threshold name of quality_checks() (e.g. min_words=50,
    max_dup_line_frac=0.3); None disables that check. metrics=False returns
    the same keep flags and reasons without the metric table (metrics is
    None), faster: each document is counted only up to its first failing
    check, as the pipeline does when it writes no metrics.
    """
    import pyarrow as pa

    if not isinstance(metrics, bool):
        raise TypeError(f"metrics must be True or False, got {type(metrics).__name__}")
    checks = quality_checks()
    names = [c[0] for c in checks]
    bounds = []
    for key, value in thresholds.items():
        if key not in names:
            raise ValueError(f"unknown quality threshold {key!r}" + _suggest(key, names))
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"threshold {key} must be a number or None, got {type(value).__name__}")
            value = float(value)
        bounds.append((key, value))
    keep, failed, values = _native.filter_quality(_as_tensor(texts), bounds, metrics)
    keep = keep.astype(bool)
    reason = [None if f < 0 else names[f] for f in failed.tolist()]
    table = None
    if values is not None:
        columns = _native.quality_metric_names()
        table = pa.table({name: pa.array(values[k]) for k, name in enumerate(columns)})
    return QualityResult(keep=keep, reason=reason, metrics=table)


# Compiled Vectorscan databases, one per (types, keep_private_ip); emptied at
# exit so that the native objects go before the extension module does.
_MASKERS: dict[tuple, Any] = {}
atexit.register(_MASKERS.clear)


def mask_pii(texts: Any, types: Optional[Iterable[str]] = None, *, keep_private_ip: bool = False):
    """PIIMasker: one Vectorscan scan, validators, typed placeholders.

    Returns (StringTensor, counts per type). types: a subset of PII_TYPES
    (None = all). keep_private_ip: leave private/reserved IP ranges unmasked.
    """
    if not hasattr(_native, "_PiiMasker"):
        raise RuntimeError("luminamoon was built without Vectorscan; mask_pii is unavailable")
    if types is not None:
        if isinstance(types, str):
            types = [types]
        types = tuple(types)
        for t in types:
            if t not in PII_TYPES:
                raise ValueError(f"unknown PII type {t!r}; known: {', '.join(PII_TYPES)}" + _suggest(str(t), PII_TYPES))
    key = (types, bool(keep_private_ip))
    masker = _MASKERS.get(key)
    if masker is None:
        masker = _MASKERS[key] = _native._PiiMasker(list(types) if types is not None else None, bool(keep_private_ip))
    out, counts = masker.mask(_as_tensor(texts))
    return StringTensor._wrap(out), dict(counts)
