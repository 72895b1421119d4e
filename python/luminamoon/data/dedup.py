"""Exact and near-duplicate removal: StreamDeduplicator (XXH3-64, .dedup WAL) and MinHashLSH.

Thin front end over luminamoon._native (C++ in src/data/dedup and
src/data/minhash); hashing, signatures and index look-ups run without the GIL.
Texts may be a list/tuple of str or bytes, a StringTensor, or any object that
exports an Arrow string array (``__arrow_c_array__``: pyarrow, polars, ...).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _native
from .batch import _as_tensor

__all__ = [
    "StreamDeduplicator",
    "MinHashLSH",
    "DedupStateCorruptError",
    "estimated_jaccard",
    "dedup_normalize",
    "minhash_kernel_target",
    "MINHASH_PRIME",
]

#: p of the permutation family h_k(x) = (a_k * x + b_k) mod p.
MINHASH_PRIME = (1 << 61) - 1

#: Raised when a WAL or LSH index is damaged where committed data lives, or
#: does not match the checkpoint position it is resumed from (RuntimeError).
DedupStateCorruptError = getattr(_native, "DedupStateCorruptError", RuntimeError)

_SYNC_POLICIES = ("fdatasync", "none")


def _refs(refs: Any, n: int) -> Optional[np.ndarray]:
    if refs is None:
        return None
    arr = np.ascontiguousarray(refs, dtype=np.int64)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"refs must be a 1-D sequence of {n} ints, got shape {arr.shape}")
    return arr


def _check_sync(sync: str) -> None:
    if sync not in _SYNC_POLICIES:
        raise ValueError(f"sync must be one of {_SYNC_POLICIES}, got {sync!r}")


def _path(p: Any) -> Optional[str]:
    return None if p is None else str(p)


class StreamDeduplicator:
    """Exact dedup by XXH3-64 of each text; the first occurrence in stream order is kept.

    wal_path: the ``.dedup`` write-ahead log (None: in memory only). It is
    replayed on open; a torn tail is cut; damage before valid blocks raises
    DedupStateCorruptError. Only committed keys persist: call ``commit()``
    (``flush()`` + fdatasync under ``sync="fdatasync"``) before checkpointing.
    normalized: hash the normalized text (lower-case, punctuation and
    whitespace runs folded) instead of the text itself.
    track_matches: remember each key's first document so that drops name it
    (a second 8 bytes per slot; the key set alone stays <= 16 B/document).
    resume_position: the ``committed_position`` a checkpoint recorded; the
    WAL is replayed up to there and the rest is cut.
    expected_distinct: size the set for this many distinct documents up front
    (no growth, so no transient 2.5x copy of the table while growing).
    memory_keys: keep at most this many distinct keys in memory; older ones
    move to sorted runs in an unnamed scratch file in ``spill_dir`` (None:
    TMPDIR or /tmp), with ~1.3 bytes a key of filter left in memory. The
    decisions and matches are the same (0: every key in memory, as where no
    scratch file can be made). The pipeline uses 65,536.
    num_threads: hashing threads (0: ``luminamoon.data.get_num_threads()``).
    """

    def __init__(
        self,
        wal_path: Any = None,
        *,
        normalized: bool = False,
        track_matches: bool = True,
        sync: str = "fdatasync",
        resume_position: Optional[int] = None,
        num_threads: int = 0,
        expected_distinct: int = 0,
        memory_keys: int = 0,
        spill_dir: Any = None,
        _split_write_pause_us: int = 0,
    ) -> None:
        _check_sync(sync)
        if expected_distinct < 0:
            raise ValueError(f"expected_distinct must be >= 0, got {expected_distinct}")
        if memory_keys < 0:
            raise ValueError(f"memory_keys must be >= 0, got {memory_keys}")
        self._d = _native._StreamDeduplicator(
            _path(wal_path), bool(normalized), bool(track_matches), sync, resume_position,
            int(num_threads), int(_split_write_pause_us), int(expected_distinct), int(memory_keys),
            _path(spill_dir),
        )
        self.wal_path = _path(wal_path)
        #: ref of the kept document each text of the last ``add`` duplicated (-1: kept).
        self.last_matched = np.empty(0, dtype=np.int64)

    def add(self, texts: Any, refs: Any = None) -> np.ndarray:
        """Keep mask (bool) of the batch, in stream order. refs: the caller's
        int64 id of each text (>= 0; e.g. a global row index or a packed shard
        position); default: the count of texts this object was given before it
        (which restarts at 0 in a resumed process: pass refs across resumes).
        The matched refs of the drops are left in ``last_matched``."""
        return self.add_with_matches(texts, refs)[0]

    def add_with_matches(self, texts: Any, refs: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(keep mask, matched ref or -1) of the batch."""
        tensor = _as_tensor(texts)
        keep, matched = self._d.add(tensor, _refs(refs, len(tensor)))
        self.last_matched = matched
        return keep.view(np.bool_), matched

    def flush(self) -> None:
        """Writes the keys added since the last flush as one CRC'd WAL block."""
        self._d.flush()

    def commit(self) -> None:
        """flush(), then fdatasync (sync="fdatasync"): the keys survive any crash."""
        self._d.commit()

    def close(self, commit: bool = True) -> None:
        """Commits (unless commit=False) and releases the WAL."""
        if self._d is not None:
            if commit:
                self._d.commit()
            self._d = None

    def __enter__(self) -> "StreamDeduplicator":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(commit=exc_type is None)

    def key_of(self, text: str | bytes) -> int:
        """The XXH3-64 key this deduplicator uses for one text."""
        return self._d.key_of(text.encode() if isinstance(text, str) else bytes(text))

    def __contains__(self, text: str | bytes) -> bool:
        return self._d.contains_key(self.key_of(text))

    def contains_key(self, key: int) -> bool:
        return self._d.contains_key(int(key))

    def keys(self) -> np.ndarray:
        """Every key held (uint64, unordered)."""
        return self._d.keys()

    def __len__(self) -> int:
        return self._d.distinct

    @property
    def committed_position(self) -> int:
        return self._d.committed_position

    @property
    def documents_seen(self) -> int:
        return self._d.documents_seen

    @property
    def set_memory_bytes(self) -> int:
        """Bytes of the key slots (at most 16 per distinct document)."""
        return self._d.set_memory_bytes

    @property
    def memory_bytes(self) -> int:
        """Key slots plus match refs, plus the spilled runs' filters and fences."""
        return self._d.memory_bytes

    @property
    def spilled_keys(self) -> int:
        """Distinct keys held in the scratch file's runs (``memory_keys``)."""
        return self._d.spilled_keys

    @property
    def replay_stats(self) -> dict:
        """What opening the WAL found: blocks, records, valid_bytes, cut_bytes."""
        return self._d.replay_stats


class MinHashLSH:
    """Streaming near-duplicate removal: MinHash signatures over word n-gram
    shingles of the normalized text, banded LSH, candidates verified by
    estimated Jaccard >= threshold against documents kept earlier.

    path: the ``.lsh`` index log (None: in memory only), persisted and
    replayed like the dedup WAL (``commit()``, ``committed_position``,
    ``resume_position``).

    Exactly reproducible: shingles are the XXH3-64 (seed 0) of each run of
    ``ngram`` words of ``dedup_normalize(text)`` joined by one space (a text of
    fewer words is one shingle, its whole normalized form).

    scheme "oph" (the default; num_perm a power of two, K = 2^k): each
    shingle x gives y = mix64(x ^ seed) (SplitMix64's finalizer), bin
    j = y >> (64 - k) and value y & (2^(64-k) - 1); a bin keeps its minimum
    (2^64 - 1 when empty). Each empty bin j then takes the value of the first
    bin filled before densification in b_t = mix64(seed2 ^ (j << 32) ^ t)
    mod K, t = 0, 1, ..., with seed2 = seed ^ 0x6F70685F64656E73. An index
    records its scheme and refuses the other.

    scheme "kperm" (version 1): permutation k is
    h_k(x) = (a_k * x + b_k) mod (2^61 - 1); a_k, b_k come from SplitMix64
    started at ``seed``: state += 0x9E3779B97F4A7C15; z = state;
    z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB;
    out = z ^ z >> 31 (all mod 2^64), drawn in the order a_0, b_0, a_1, b_1, ...
    with a_k = 1 + out % (p - 1) and b_k = out % p. Band b hashes rows
    b*rows .. b*rows+rows-1 of the signature (little-endian bytes) with
    XXH3-64 seeded by b.
    """

    def __init__(
        self,
        num_perm: int = 64,
        bands: int = 8,
        rows: int = 8,
        ngram: int = 5,
        threshold: float = 0.8,
        path: Any = None,
        *,
        seed: int = 1,
        scheme: str = "oph",
        sync: str = "fdatasync",
        resume_position: Optional[int] = None,
        num_threads: int = 0,
        _split_write_pause_us: int = 0,
    ) -> None:
        _check_sync(sync)
        self._l = _native._MinHashLSH(
            int(num_perm), int(bands), int(rows), int(ngram), float(threshold), int(seed),
            _path(path), sync, resume_position, int(num_threads), int(_split_write_pause_us), str(scheme),
        )
        self.scheme = str(scheme)
        self.num_perm, self.bands, self.rows, self.ngram = int(num_perm), int(bands), int(rows), int(ngram)
        self.threshold, self.seed, self.path = float(threshold), int(seed), _path(path)
        #: estimated Jaccard of each text of the last ``add`` with its match (0 when kept).
        self.last_similarity = np.empty(0, dtype=np.float64)

    def signatures(self, texts: Any, num_threads: int = 0) -> np.ndarray:
        """MinHash signatures, np.uint64 of shape (n, num_perm)."""
        return self._l.signatures(_as_tensor(texts), int(num_threads), False)

    def _reference_signatures(self, texts: Any) -> np.ndarray:
        """Signatures from the scalar __int128 kernel (tests compare it with the vector one)."""
        return self._l.signatures(_as_tensor(texts), 1, True)

    def add(self, texts: Any, refs: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(keep mask, matched ref or -1): a text is dropped when it is a near
        duplicate of a document kept before it (earlier batches or earlier in
        this batch); matched is then that document's ref (the most similar one,
        the earliest on a tie). refs as in StreamDeduplicator.add."""
        tensor = _as_tensor(texts)
        keep, matched, sim = self._l.add(tensor, _refs(refs, len(tensor)))
        self.last_similarity = sim
        return keep.view(np.bool_), matched

    def add_signatures(self, signatures: np.ndarray, refs: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """add() from precomputed signatures (n, num_perm)."""
        sigs = np.ascontiguousarray(signatures, dtype=np.uint64)
        if sigs.ndim != 2:
            raise ValueError(f"signatures must be 2-D (n, {self.num_perm}), got shape {sigs.shape}")
        keep, matched, sim = self._l.add_signatures(sigs, _refs(refs, sigs.shape[0]))
        self.last_similarity = sim
        return keep.view(np.bool_), matched

    def shingle_hashes(self, text: str | bytes) -> np.ndarray:
        """XXH3-64 (seed 0) of every word n-gram of the normalized text, in order."""
        return self._l.shingle_hashes(text.encode() if isinstance(text, str) else bytes(text))

    def permutations(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) of the permutations h_k(x) = (a_k x + b_k) mod (2^61 - 1)."""
        return self._l.permutations()

    def flush(self) -> None:
        self._l.flush()

    def commit(self) -> None:
        self._l.commit()

    def close(self, commit: bool = True) -> None:
        if self._l is not None:
            if commit:
                self._l.commit()
            self._l = None

    def __enter__(self) -> "MinHashLSH":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(commit=exc_type is None)

    def __len__(self) -> int:
        return self._l.kept

    @property
    def committed_position(self) -> int:
        return self._l.committed_position

    @property
    def documents_seen(self) -> int:
        return self._l.documents_seen

    @property
    def memory_bytes(self) -> int:
        return self._l.memory_bytes

    @property
    def replay_stats(self) -> dict:
        return self._l.replay_stats


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of equal positions of two MinHash signatures."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"signatures must be 1-D of the same length, got {a.shape} and {b.shape}")
    return float(np.count_nonzero(a == b)) / a.size


def dedup_normalize(text: str | bytes) -> bytes:
    """The normalized form that MinHash shingles and normalized exact keys use."""
    return _native.dedup_normalize(text.encode() if isinstance(text, str) else bytes(text))


def minhash_kernel_target() -> str:
    """The Highway target the signature kernel runs on this CPU, e.g. "AVX3"."""
    return _native.minhash_kernel_target()
