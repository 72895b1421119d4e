"""TokenLoader: packed token sequences, shuffled, sharded by rank and worker, resuming exactly.

Reads token shards (luminamoon.data.token_shards) and yields batches of
packed sequences of ``seq_len`` tokens with their document boundaries.
See Note [global sample order] for the contract that makes resume exact when
the world size or the worker count changes.
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from .pipeline import DataError
from .token_shards import TokenShardSet

__all__ = ["TokenLoader", "TokenSource", "PackedSequenceOrder"]  # PackedTokenDataset: token_dataset.py

# Note [global sample order]
# Everything a resumed run yields is fixed by one global, infinite sample
# order that depends on the sources, seq_len, seed and shuffle settings only,
# never on the world size or the worker count:
#  * Source s, epoch e: its shards in a seeded order (a permutation keyed by
#    (seed, e, s)), their documents in file order, concatenated into one token
#    stream of T_s tokens; sequence q is tokens [q*L, (q+1)*L) of that stream
#    (the last one padded), so every token appears exactly once per epoch and
#    documents keep their boundaries (segment_ids, position_ids).
#  * Within windows of `shuffle_window` consecutive sequences, a seeded
#    permutation keyed by (seed, e, s, window) picks which sequence comes when.
#  * Mixing: the N = sum N_s sequences of an epoch are merged by the key
#    (2i + 1) / (2 w_s) for the i-th sequence of source s with weight w_s (ties
#    by source), so each source is spread evenly at its weight's rate until it
#    runs out; an epoch is every sequence of every source exactly once.
#  * Sample A of the global order is sample A mod N of epoch A // N.
# Rank r of R takes samples A0 + r, A0 + r + R, ... (A0: where the run
# started); its j-th sample belongs to batch j // B, and worker w of W builds
# the batches b with b mod W == w. torch's DataLoader returns the workers'
# batches round-robin, so a rank's batches come out in the same order for any
# W. The state is the next global sample A0 + n * R after n samples per rank:
# a single number that any world size and worker count can start from, so a
# resumed run yields exactly the samples the uninterrupted run had left, in
# the same global order (identical per-rank streams when R is unchanged).
# Permutations come from SplitMix64 keys sorted stably: the same on every
# machine and NumPy version.

_M64 = (1 << 64) - 1


def _mix64_scalar(x: int) -> int:
    x &= _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _mix64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _key(*words: int) -> int:
    h = 0x9E3779B97F4A7C15
    for w in words:
        h = _mix64_scalar(h ^ (w & _M64))
    return h


def seeded_permutation(n: int, *words: int) -> np.ndarray:
    """A permutation of range(n) fixed by `words`: the same on every machine."""
    keys = _mix64(np.arange(n, dtype=np.uint64) ^ np.uint64(_key(*words)))
    return np.argsort(keys, kind="stable")


@dataclass(frozen=True)
class TokenSource:
    """A token-shard directory and its mixing weight."""

    path: str
    weight: float = 1.0


def _as_sources(sources: Any, weights: Optional[Sequence[float]]) -> list[TokenSource]:
    if isinstance(sources, (str, os.PathLike, TokenSource)):
        sources = [sources]
    out = []
    for k, s in enumerate(sources):
        if isinstance(s, TokenSource):
            out.append(s)
        elif isinstance(s, (tuple, list)) and len(s) == 2:
            out.append(TokenSource(os.fspath(s[0]), float(s[1])))
        else:
            out.append(TokenSource(os.fspath(s), 1.0))
    if weights is not None:
        if len(weights) != len(out):
            raise DataError(f"{len(weights)} weights for {len(out)} sources", 2)
        out = [TokenSource(s.path, float(w)) for s, w in zip(out, weights)]
    if not out:
        raise DataError("TokenLoader needs at least one source", 2)
    for s in out:
        if not (math.isfinite(s.weight) and s.weight > 0):
            raise DataError(f"source {s.path}: weight must be a positive number, not {s.weight}", 2)
    return out


class _SourcePlan:
    """One source's packed sequences: random access to sequence i of epoch e."""

    def __init__(self, index: int, shards: TokenShardSet, seq_len: int, seed: int,
                 shuffle: bool, window: int) -> None:
        self.index, self.set, self.seq_len, self.seed = index, shards, seq_len, seed
        self.shuffle, self.window = shuffle, window
        self.tokens = shards.tokens
        self.sequences = -(-self.tokens // seq_len)
        self._epoch_cache: tuple[int, Any] = (-1, None)
        self._window_cache: tuple[tuple[int, int], Any] = ((-1, -1), None)

    def _layout(self, epoch: int):
        """Shard order of the epoch and cumulative token and document counts."""
        if self._epoch_cache[0] != epoch:
            n = len(self.set.shards)
            order = seeded_permutation(n, self.seed, 1, epoch, self.index) if self.shuffle else np.arange(n)
            toks = np.array([self.set.shards[k].tokens for k in order], dtype=np.int64)
            docs = np.array([self.set.shards[k].documents for k in order], dtype=np.int64)
            cum_t = np.concatenate([[0], np.cumsum(toks)])
            cum_d = np.concatenate([[0], np.cumsum(docs)])
            self._epoch_cache = (epoch, (order, cum_t, cum_d))
        return self._epoch_cache[1]

    def _shuffled(self, epoch: int, i: int) -> int:
        if not self.shuffle or self.window <= 1:
            return i
        w = i // self.window
        base = w * self.window
        if self._window_cache[0] != (epoch, w):
            size = min(self.window, self.sequences - base)
            self._window_cache = ((epoch, w), seeded_permutation(size, self.seed, 2, epoch, self.index, w))
        return base + int(self._window_cache[1][i - base])

    def fill(self, epoch: int, i: int, ids: np.ndarray, pos: np.ndarray, seg: np.ndarray) -> None:
        """Writes sequence i of `epoch` into the rows ids/pos/seg (length seq_len)."""
        q = self._shuffled(epoch, i)
        order, cum_t, cum_d = self._layout(epoch)
        a = q * self.seq_len
        b = min(a + self.seq_len, self.tokens)
        at, first_doc = a, None
        while at < b:
            k = int(np.searchsorted(cum_t, at, side="right")) - 1
            shard = self.set.shards[int(order[k])]
            lo = at - int(cum_t[k])
            hi = min(b, int(cum_t[k + 1])) - int(cum_t[k])
            off = shard.doc_offsets
            local = np.arange(lo, hi, dtype=np.int64)
            d = np.searchsorted(off, local, side="right") - 1
            docnum = int(cum_d[k]) + d
            if first_doc is None:
                first_doc = int(docnum[0])
            doc_start = int(cum_t[k]) + off[d].astype(np.int64)
            r0, r1 = at - a, at - a + (hi - lo)
            ids[r0:r1] = shard.token_ids[lo:hi]
            pos[r0:r1] = int(cum_t[k]) + local - np.maximum(doc_start, a)
            seg[r0:r1] = docnum - first_doc
            at = int(cum_t[k]) + hi
        n = b - a
        if n < self.seq_len:  # the epoch's last sequence of this source: padding
            pos[n:] = 0
            seg[n:] = -1


class PackedSequenceOrder:
    """The global sample order of Note [global sample order]: sample A -> (source, sequence)."""

    def __init__(self, sources: Any, seq_len: int, *, weights: Optional[Sequence[float]] = None,
                 seed: int = 0, shuffle: bool = True, shuffle_window: int = 1024, pad_id: int = 0,
                 skip_empty_sources: bool = False, verify: bool = False) -> None:
        if int(seq_len) < 1:
            raise DataError(f"seq_len must be at least 1, not {seq_len}", 2)
        self.seq_len, self.seed, self.pad_id = int(seq_len), int(seed), int(pad_id)
        self.shuffle, self.shuffle_window = bool(shuffle), int(shuffle_window)
        specs = _as_sources(sources, weights)
        self.sources: list[TokenSource] = []
        self.plans: list[_SourcePlan] = []
        for spec in specs:
            shards = TokenShardSet(spec.path, verify=verify)
            if shards.tokens == 0:
                if skip_empty_sources:
                    continue
                raise DataError(f"source {spec.path} holds no tokens: an empty source in a mix would "
                                "silently change the mixing proportions (skip_empty_sources=True "
                                "drops it)", 3)
            self.plans.append(_SourcePlan(len(self.plans), shards, self.seq_len, self.seed,
                                          self.shuffle, self.shuffle_window))
            self.sources.append(spec)
        if not self.plans:
            raise DataError("every source is empty: nothing to load", 3)
        self.epoch_samples = sum(p.sequences for p in self.plans)
        self._mix: Optional[tuple[np.ndarray, np.ndarray]] = None
        self._fingerprint: Optional[str] = None

    def fingerprint(self) -> str:
        """What a checkpoint must match to be resumed by this order."""
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        h = hashlib.sha256()
        h.update(repr((1, self.seq_len, self.seed, self.shuffle, self.shuffle_window, self.pad_id)).encode())
        for spec, plan in zip(self.sources, self.plans):
            h.update(repr((spec.weight, [(s.documents, s.tokens) for s in plan.set.shards],
                           [e["payload_crc32"] for e in plan.set.manifest["shards"]])).encode())
        return h.hexdigest()

    def _mixed(self) -> tuple[np.ndarray, np.ndarray]:
        if self._mix is None:
            counts = [p.sequences for p in self.plans]
            keys = np.concatenate([(2.0 * np.arange(n) + 1.0) / (2.0 * self.sources[s].weight)
                                   for s, n in enumerate(counts)])
            src = np.concatenate([np.full(n, s, dtype=np.int32) for s, n in enumerate(counts)])
            idx = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
            order = np.argsort(keys, kind="stable")  # ties: the lower source index first
            self._mix = (src[order], idx[order])
        return self._mix

    def locate(self, sample: int) -> tuple[int, int, int]:
        """(epoch, source, sequence index within the source's epoch) of global sample A."""
        epoch, g = divmod(int(sample), self.epoch_samples)
        if len(self.plans) == 1:
            return epoch, 0, g
        src, idx = self._mixed()
        return epoch, int(src[g]), int(idx[g])

    def batch(self, samples: Sequence[int]) -> dict:
        """The packed rows of the given global samples, as NumPy arrays."""
        n, L = len(samples), self.seq_len
        ids = np.full((n, L), self.pad_id, dtype=np.int64)
        pos = np.zeros((n, L), dtype=np.int64)
        seg = np.zeros((n, L), dtype=np.int32)
        source = np.zeros(n, dtype=np.int32)
        for row, a in enumerate(samples):
            epoch, s, i = self.locate(a)
            self.plans[s].fill(epoch, i, ids[row], pos[row], seg[row])
            source[row] = s
        return {"input_ids": ids, "position_ids": pos, "segment_ids": seg, "source": source,
                "sample_index": np.asarray(samples, dtype=np.int64)}


def _torch():
    import torch
    return torch


def _dataset(*args: Any, **kwargs: Any):
    from .token_dataset import PackedTokenDataset  # imports torch
    return PackedTokenDataset(*args, **kwargs)


class TokenLoader:
    """Packed sequences of ``seq_len`` tokens from token shards, for one rank.

    Yields dicts of tensors: ``input_ids`` and ``position_ids`` (int64,
    [batch, seq_len]; positions restart at each document and at each
    sequence), ``segment_ids`` (int32: the document's number inside the row,
    -1 on padding; mask attention where they differ), ``source`` and
    ``sample_index`` (the global sample, Note [global sample order]).

    ``state_dict()`` is the next global sample; ``load_state_dict()`` on a
    loader with any world size or worker count resumes exactly there.
    ``num_epochs=None`` streams forever. ``device="cuda"`` copies each batch
    from pinned memory on a side stream, one batch ahead."""

    def __init__(self, sources: Any, seq_len: int, batch_size: int, *, weights: Optional[Sequence[float]] = None,
                 rank: int = 0, world_size: int = 1, num_workers: int = 0, seed: int = 0,
                 shuffle: bool = True, shuffle_window: int = 1024, num_epochs: Optional[int] = 1,
                 pad_id: int = 0, skip_empty_sources: bool = False, pin_memory: bool = False,
                 device: Any = None, prefetch_factor: int = 2, verify: bool = False) -> None:
        self.order = PackedSequenceOrder(sources, seq_len, weights=weights, seed=seed, shuffle=shuffle,
                                         shuffle_window=shuffle_window, pad_id=pad_id,
                                         skip_empty_sources=skip_empty_sources, verify=verify)
        if not 0 <= int(rank) < int(world_size):
            raise DataError(f"rank {rank} is outside world_size {world_size}", 2)
        if int(batch_size) < 1:
            raise DataError(f"batch_size must be at least 1, not {batch_size}", 2)
        if int(num_workers) < 0:
            raise DataError(f"num_workers must be >= 0, not {num_workers}", 2)
        self.batch_size, self.rank, self.world_size = int(batch_size), int(rank), int(world_size)
        self.num_workers, self.prefetch_factor = int(num_workers), int(prefetch_factor)
        self.end = None if num_epochs is None else int(num_epochs) * self.order.epoch_samples
        self.device = device
        self.pin_memory = bool(pin_memory) or device is not None
        self._start = 0      # global sample this iteration started from
        self._consumed = 0   # samples of this rank yielded since then

    @property
    def epoch_samples(self) -> int:
        return self.order.epoch_samples

    def next_sample(self) -> int:
        """The global sample a resumed run starts from (Note [global sample order])."""
        a = self._start + self._consumed * self.world_size
        return a if self.end is None else min(a, self.end)

    def state_dict(self) -> dict:
        return {"version": 1, "next_sample": self.next_sample(), "fingerprint": self.order.fingerprint()}

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != 1 or "next_sample" not in state:
            raise DataError("not a TokenLoader state (version 1)", 4)
        if state.get("fingerprint") != self.order.fingerprint():
            raise DataError("the checkpoint was taken over other sources or settings "
                            "(seq_len, seed, shuffle, weights or shard contents differ)", 5)
        self._start, self._consumed = int(state["next_sample"]), 0

    def _loader(self):
        torch = _torch()
        dataset = _dataset(self.order, self.batch_size, rank=self.rank, world_size=self.world_size,
                                     start=self._start, end=self.end)
        kwargs: dict = {}
        if self.num_workers > 0:
            kwargs = dict(prefetch_factor=self.prefetch_factor, persistent_workers=False)
        pin = self.pin_memory and torch.cuda.is_available()
        return torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=self.num_workers,
                                           pin_memory=pin, **kwargs)

    def __iter__(self) -> Iterator[dict]:
        self._start, self._consumed = self.next_sample(), 0
        batches = iter(self._loader())
        if self.device is None or str(self.device) == "cpu":
            for batch in batches:
                self._consumed += len(batch["sample_index"])
                yield batch
            return
        yield from self._to_device(batches)

    def _to_device(self, batches: Iterator[dict]) -> Iterator[dict]:
        """Copies batch k+1 on a side stream while the caller works on batch k."""
        torch = _torch()
        device = torch.device(self.device)
        stream = torch.cuda.Stream(device=device)

        def copy(batch: dict) -> dict:
            with torch.cuda.stream(stream):
                return {k: v.to(device, non_blocking=True) for k, v in batch.items()}

        pending = None
        for batch in batches:
            moved = copy(batch)
            if pending is not None:
                yield self._ready(pending, stream)
            pending = moved
        if pending is not None:
            yield self._ready(pending, stream)

    def _ready(self, batch: dict, stream) -> dict:
        torch = _torch()
        current = torch.cuda.current_stream(stream.device)
        current.wait_stream(stream)
        for v in batch.values():
            v.record_stream(current)
        self._consumed += int(batch["sample_index"].shape[0])
        return batch
