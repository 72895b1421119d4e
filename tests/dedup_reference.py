"""Pure-Python references of exact dedup and MinHash LSH, written from the spec
(docs: data-engine.md sections 4 and 5, and the MinHashLSH docstring) without
calling luminamoon: normalization, XXH3-64 keys (the `xxhash` package),
SplitMix64 permutations, signatures, band keys and the streaming decision."""
from __future__ import annotations

import re

import xxhash

P61 = (1 << 61) - 1
MASK64 = (1 << 64) - 1

# ASCII whitespace and punctuation, U+00A0, U+2000..U+206F, U+3000..U+303F (UTF-8).
_SEPARATORS = re.compile(
    rb"(?:[\t\n\x0b\x0c\r !-/:-@\[-`{-~]|\xc2\xa0|\xe2\x80[\x80-\xbf]|\xe2\x81[\x80-\xaf]|\xe3\x80[\x80-\xbf])+"
)


def as_bytes(text) -> bytes:
    return text.encode() if isinstance(text, str) else bytes(text)


def normalize(text) -> bytes:
    words = [w for w in _SEPARATORS.split(as_bytes(text)) if w]
    return b" ".join(w.lower() for w in words)  # bytes.lower() folds ASCII only


def exact_key(text, normalized: bool = False) -> int:
    data = normalize(text) if normalized else as_bytes(text)
    return xxhash.xxh3_64_intdigest(data)


def shingles(text, ngram: int = 5) -> list[bytes]:
    words = normalize(text).split(b" ") if normalize(text) else []
    if len(words) < ngram:
        return [b" ".join(words)]
    return [b" ".join(words[i : i + ngram]) for i in range(len(words) - ngram + 1)]


def shingle_hashes(text, ngram: int = 5) -> list[int]:
    return [xxhash.xxh3_64_intdigest(s, seed=0) for s in shingles(text, ngram)]


def permutations(num_perm: int = 64, seed: int = 1) -> tuple[list[int], list[int]]:
    state = seed & MASK64

    def next_u64() -> int:
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    a, b = [], []
    for _ in range(num_perm):
        a.append(1 + next_u64() % (P61 - 1))
        b.append(next_u64() % P61)
    return a, b


def kperm_signature(text, num_perm: int = 64, ngram: int = 5, seed: int = 1, perms=None) -> list[int]:
    a, b = perms or permutations(num_perm, seed)
    xs = shingle_hashes(text, ngram)
    return [min((ak * x + bk) % P61 for x in xs) for ak, bk in zip(a, b)]


def mix64(z: int) -> int:
    """SplitMix64's finalizer."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


OPH_SEED2_XOR = 0x6F70685F64656E73  # "oph_dens"


def oph_signature(text, num_perm: int = 64, ngram: int = 5, seed: int = 1) -> list[int]:
    """One-permutation hashing with optimal densification, as spec v2 section 5 defines it."""
    k = num_perm.bit_length() - 1
    assert 1 << k == num_perm
    empty = MASK64
    sig = [empty] * num_perm
    for x in shingle_hashes(text, ngram):
        y = mix64(x ^ seed)
        j = y >> (64 - k) if k else 0
        sig[j] = min(sig[j], y & (MASK64 >> k))
    before = list(sig)
    if all(v == empty for v in before):
        return sig
    seed2 = seed ^ OPH_SEED2_XOR
    for j in range(num_perm):
        t = 0
        while before[j] == empty:
            b = mix64(seed2 ^ (j << 32) ^ t) % num_perm
            if before[b] != empty:
                sig[j] = before[b]
                break
            t += 1
    return sig


def signature(text, num_perm: int = 64, ngram: int = 5, seed: int = 1, scheme: str = "oph") -> list[int]:
    if scheme == "oph":
        return oph_signature(text, num_perm, ngram, seed)
    return kperm_signature(text, num_perm, ngram, seed)


def band_keys(sig: list[int], bands: int, rows: int) -> list[int]:
    keys = []
    for band in range(bands):
        raw = b"".join(v.to_bytes(8, "little") for v in sig[band * rows : (band + 1) * rows])
        keys.append(xxhash.xxh3_64_intdigest(raw, seed=band))
    return keys


class ReferenceLSH:
    """Streaming LSH: drop when a band collides with a kept document whose
    estimated Jaccard >= threshold; report the most similar (earliest on a tie)."""

    def __init__(self, bands: int = 8, rows: int = 8, threshold: float = 0.8):
        self.bands, self.rows, self.threshold = bands, rows, threshold
        self.tables: list[dict[int, list[int]]] = [dict() for _ in range(bands)]
        self.kept: list[tuple[int, list[int]]] = []  # (ref, signature)

    def add(self, sig: list[int], ref: int) -> tuple[bool, int, float]:
        keys = band_keys(sig, self.bands, self.rows)
        candidates = set()
        for band, key in enumerate(keys):
            candidates.update(self.tables[band].get(key, ()))
        best, best_sim = None, -1.0
        for c in sorted(candidates):
            sim = sum(x == y for x, y in zip(sig, self.kept[c][1])) / len(sig)
            if sim >= self.threshold and sim > best_sim:
                best, best_sim = c, sim
        if best is not None:
            return False, self.kept[best][0], best_sim
        idx = len(self.kept)
        self.kept.append((ref, sig))
        for band, key in enumerate(keys):
            self.tables[band].setdefault(key, []).append(idx)
        return True, -1, 0.0
