"""Global exact and near-duplicate decisions over many shards, equal to the
local stream's (spec data-engine.md, sections 4 and 5, "Distributed runs").

The inputs are what ``ShardTasks.map_shard`` (C++) yields per shard for the
documents that pass cleaner and quality filter: their refs
``(shard << 40) | line``, whose order is the global stream order, their exact
keys, band keys and MinHash signatures. The functions here are the reduce
side of the shuffle: each sees one key range, never the whole corpus.

Note [global resolution]
The local rules, in stream order:
- exact: a document whose key was seen before is dropped, matched to the
  first document with that key;
- near: a document (kept by exact dedup) is dropped when one of its band keys
  (band b, key k) equals that of an earlier document *kept by the near stage*
  with estimated Jaccard >= threshold; matched to the most similar one, the
  earliest on a tie.
Exact: partition by key; the first occurrence is the smallest ref of a key.
Near: whether a document is kept depends only on the documents that share a
band key with it, recursively, i.e. on its connected component of the graph
whose edges join documents sharing a (band, key). A document outside the
component never shares a band key with one inside, so the local LSH run over
the component's documents alone, in ref order, makes exactly the local
decisions for them (the same candidates, kept set and tie order). Hence:
band rows partitioned by key -> buckets of >= 2 documents (beside the
exact reduce) -> edges among the survivors of exact dedup ->
components -> each component (or any union of whole components) replayed
through the native MinHashLSH in ref order. Documents in no bucket are kept.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = [
    "REF_LINE_BITS",
    "ref_shard",
    "key_partition",
    "split_rows",
    "exact_decisions",
    "band_rows",
    "bucket_members",
    "bucket_ids",
    "candidate_edges",
    "components",
    "component_partition",
    "near_decisions",
]

#: refs are (shard << REF_LINE_BITS) | line (src/data/pipeline/kept_docs.h)
REF_LINE_BITS = 40
_EMPTY_I64 = np.empty(0, dtype=np.int64)
_EMPTY_U64 = np.empty(0, dtype=np.uint64)


def ref_shard(refs: np.ndarray) -> np.ndarray:
    return (np.asarray(refs, dtype=np.int64) >> REF_LINE_BITS).astype(np.int64)


def key_partition(keys: np.ndarray, partitions: int) -> np.ndarray:
    """The reducer of each XXH3-64 key: its top bits (the keys are uniform)."""
    keys = np.asarray(keys, dtype=np.uint64)
    return ((keys >> np.uint64(32)) * np.uint64(partitions) >> np.uint64(32)).astype(np.int64)


def split_rows(partition: np.ndarray, partitions: int, *columns: np.ndarray) -> list[tuple]:
    """Rows grouped by partition (stable: row order kept within one)."""
    order = np.argsort(partition, kind="stable")
    bounds = np.searchsorted(partition[order], np.arange(partitions + 1))
    out = []
    for p in range(partitions):
        sel = order[bounds[p]:bounds[p + 1]]
        out.append(tuple(np.ascontiguousarray(c[sel]) for c in columns))
    return out


def exact_decisions(keys: np.ndarray, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dropped refs, matched refs), sorted by ref: every document but the
    first (smallest ref) of its key, matched to that first one."""
    keys = np.asarray(keys, dtype=np.uint64)
    refs = np.asarray(refs, dtype=np.int64)
    if keys.size == 0:
        return _EMPTY_I64, _EMPTY_I64
    order = np.lexsort((refs, keys))
    k, r = keys[order], refs[order]
    first = np.ones(k.size, dtype=bool)
    first[1:] = k[1:] != k[:-1]
    group_first = r[first][np.cumsum(first) - 1]
    dropped, matched = r[~first], group_first[~first]
    by_ref = np.argsort(dropped, kind="stable")
    return dropped[by_ref], matched[by_ref]


def band_rows(band_keys: np.ndarray, refs: np.ndarray, bands: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(band, key, ref) per band of every document; band_keys is n x bands."""
    refs = np.asarray(refs, dtype=np.int64)
    keys = np.asarray(band_keys, dtype=np.uint64).reshape(refs.size, bands)
    band = np.tile(np.arange(bands, dtype=np.int16), refs.size)
    return band, keys.ravel(), np.repeat(refs, bands)


def bucket_members(band: np.ndarray, keys: np.ndarray, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, ref) of every row whose (band, key) bucket holds >= 2
    documents, grouped by bucket (Note [bucket ids]). Exact duplicates are
    still among them: the band reduce runs beside the exact reduce, and
    candidate_edges leaves them out."""
    bucket = bucket_ids(band, keys)
    if bucket.size < 2:
        return _EMPTY_U64, _EMPTY_I64
    order = np.argsort(bucket)  # one 64-bit key: a vectorized sort, 8x faster than a lexsort of (band, key)
    bucket = bucket[order]
    shared = bucket[1:] == bucket[:-1]
    member = np.zeros(bucket.size, dtype=bool)
    member[1:] = shared
    member[:-1] |= shared
    return bucket[member], np.asarray(refs, dtype=np.int64)[order[member]]


# Note [bucket ids]: a (band, key) pair is folded into one 64-bit id, the key
# XOR a multiple of the band's number by an odd constant. Within a band the
# fold is a bijection; two pairs of different bands meet only when their keys
# differ by that XOR (2^-64 for uniform XXH3 keys). Such a meeting merges two
# buckets, which can only add candidate edges, i.e. join two components into
# one resolver's group; the resolution replays the native LSH over the group,
# which compares real band keys, so its decisions stay the local run's. A
# missing edge would change them; a merge never drops one.
def bucket_ids(band: np.ndarray, keys: np.ndarray) -> np.ndarray:
    band = np.asarray(band).astype(np.uint64) + np.uint64(1)
    return np.asarray(keys, dtype=np.uint64) ^ (band * np.uint64(0x9E3779B97F4A7C15))


def candidate_edges(bucket: np.ndarray, refs: np.ndarray,
                    excluded: np.ndarray = _EMPTY_I64) -> tuple[np.ndarray, np.ndarray]:
    """Edges (first, other) joining the documents of each bucket that still
    holds >= 2 once the rows of `excluded` refs (exact duplicates, which never
    reach the near stage) are left out. The rows come grouped by bucket, as
    bucket_members gives them: one key range's rows, or several key ranges'
    one after another (a bucket lies in one key range)."""
    bucket = np.asarray(bucket, dtype=np.uint64)
    refs = np.asarray(refs, dtype=np.int64)
    if excluded.size and refs.size:
        keep = ~_member(refs, np.asarray(excluded, dtype=np.int64))
        bucket, refs = bucket[keep], refs[keep]
    if refs.size < 2:
        return _EMPTY_I64, _EMPTY_I64
    # The rows are grouped already: no sort (an argsort of those 240k rows took ~15 ms more).
    # Each bucket's first document is its smallest ref, found without ordering the refs.
    start = np.ones(refs.size, dtype=bool)
    start[1:] = bucket[1:] != bucket[:-1]
    first = np.minimum.reduceat(refs, np.flatnonzero(start))[np.cumsum(start) - 1]
    sel = refs != first  # a bucket of one document has no other
    return first[sel], refs[sel]


_LINE_MASK = (1 << REF_LINE_BITS) - 1
_MEMBER_TABLE_LIMIT = 1 << 26  # bytes of the dense table below (64 MB); past it, a binary search


def _member(refs: np.ndarray, of: np.ndarray) -> np.ndarray:
    """refs[i] in `of`, by a dense table of (shard, line) slots: one gather,
    ~1 ms for the 240k bucket rows of the generated 400 MB corpus, where
    np.isin took ~15 ms and a binary search ~19 ms of the driver's serial
    middle (docs/benchmarks.md, issue 17, session 27)."""
    shards = int(max(refs.max(), of.max()) >> REF_LINE_BITS) + 1
    lines = int(max((refs & _LINE_MASK).max(), (of & _LINE_MASK).max())) + 1
    if shards * lines > _MEMBER_TABLE_LIMIT or refs.min() < 0 or of.min() < 0:
        return np.isin(refs, of)
    table = np.zeros(shards * lines, dtype=bool)
    table[(of >> REF_LINE_BITS) * lines + (of & _LINE_MASK)] = True
    return table[(refs >> REF_LINE_BITS) * lines + (refs & _LINE_MASK)]


def components(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, label): every ref on an edge, sorted, and the smallest ref of
    its connected component (minimum-label propagation with pointer jumping:
    a label is always a node of the same component, so the fixed point, where
    both ends of every edge agree, labels each component by its minimum)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    nodes = np.unique(np.concatenate([a, b]))
    if nodes.size == 0:
        return nodes, nodes
    ia, ib = np.searchsorted(nodes, a), np.searchsorted(nodes, b)
    label = np.arange(nodes.size)
    while True:
        low = np.minimum(label[ia], label[ib])
        new = label.copy()
        np.minimum.at(new, ia, low)
        np.minimum.at(new, ib, low)
        new = new[new]
        if np.array_equal(new, label):
            return nodes, nodes[label]
        label = new


def component_partition(labels: np.ndarray, partitions: int) -> np.ndarray:
    """The resolver of each component (a multiplicative hash of its label)."""
    h = np.asarray(labels, dtype=np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return key_partition(h, partitions)


def near_decisions(refs: np.ndarray, signatures: np.ndarray, *, num_perm: int, bands: int, rows: int,
                   ngram: int, threshold: float, seed: int, scheme: str) -> tuple[np.ndarray, np.ndarray]:
    """(dropped refs, matched refs) of whole components, replayed in ref order
    through the native MinHashLSH (the local stage's own code)."""
    from .dedup import MinHashLSH

    refs = np.asarray(refs, dtype=np.int64)
    if refs.size == 0:
        return _EMPTY_I64, _EMPTY_I64
    order = np.argsort(refs, kind="stable")
    lsh = MinHashLSH(num_perm, bands, rows, ngram, threshold, None, seed=seed, scheme=scheme, num_threads=1)
    keep, matched = lsh.add_signatures(np.asarray(signatures)[order], refs[order])
    drop = ~keep
    return refs[order][drop], np.asarray(matched)[drop]


def concat(parts: Sequence[tuple], width: int) -> tuple:
    """Column-wise concatenation of row groups (tuples of `width` arrays)."""
    if not parts:
        raise ValueError("no row groups")
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(width))
