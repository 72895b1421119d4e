"""Generated corpora for the dedup benchmarks: web-like documents of Zipf-
distributed pseudo-words with planted exact and near duplicates, and pairs
planted at a known exact Jaccard similarity of their word 5-gram sets."""
from __future__ import annotations

import random

import numpy as np


def vocabulary(size: int = 60_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    p = 1.0 / np.arange(1, 27)
    p /= p.sum()
    lengths = rng.integers(2, 11, size=size)
    words = ["".join(rng.choice(letters, size=n, p=p)) for n in lengths]
    # Capitals and punctuation, so normalization has work to do.
    for i in rng.choice(size, size=size // 10, replace=False):
        words[i] = words[i].capitalize() + rng.choice([",", ".", ";", ""])
    return np.array(words, dtype=object)


def documents(target_bytes: int, exact_fraction: float = 0.2, near_fraction: float = 0.1,
              seed: int = 1) -> tuple[list[str], dict]:
    """Documents totalling about target_bytes; exact_fraction of them are exact
    copies of an earlier document, near_fraction are copies of an earlier one
    with 1-4% of the words replaced. Returns (docs, counts)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(seed=seed)
    zipf = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    cdf = np.cumsum(zipf / zipf.sum())
    cdf[-1] = 1.0
    docs: list[str] = []
    originals: list[int] = []
    counts = {"original": 0, "exact": 0, "near": 0}
    total = 0
    while total < target_bytes:
        r = rng.random()
        if originals and r < exact_fraction:
            text = docs[originals[rng.integers(len(originals))]]
            counts["exact"] += 1
        elif originals and r < exact_fraction + near_fraction:
            words = docs[originals[rng.integers(len(originals))]].split(" ")
            for _ in range(max(1, int(len(words) * rng.uniform(0.01, 0.04)))):
                words[rng.integers(len(words))] = vocab[rng.integers(len(vocab))]
            text = " ".join(words)
            counts["near"] += 1
        else:
            n = int(np.clip(rng.lognormal(6.0, 0.6), 50, 4000))  # ~400 words median
            text = " ".join(vocab[np.searchsorted(cdf, rng.random(n))])
            originals.append(len(docs))
            counts["original"] += 1
        docs.append(text)
        total += len(text)
    return docs, counts


def shingle_set(words: list[str], n: int = 5) -> set:
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def exact_jaccard(a: list[str], b: list[str], n: int = 5) -> float:
    sa, sb = shingle_set(a, n), shingle_set(b, n)
    return len(sa & sb) / len(sa | sb)


def planted_pair(rng: random.Random, target: float, words: int = 800, tolerance: float = 0.01):
    """(base, variant, exact Jaccard) with |J - target| <= tolerance: words of
    the base replaced at random positions (a fixed order), the count found by
    bisection on the exact Jaccard of the two 5-gram sets."""
    while True:
        base = [f"w{rng.randrange(10**12):x}" for _ in range(words)]
        order = list(range(words))
        rng.shuffle(order)
        fresh = [f"v{rng.randrange(10**12):x}" for _ in range(words)]

        def variant(k: int) -> list[str]:
            out = list(base)
            for pos in order[:k]:
                out[pos] = fresh[pos]
            return out

        lo, hi = 0, words
        while lo < hi:  # smallest k with J(k) <= target
            mid = (lo + hi) // 2
            if exact_jaccard(base, variant(mid)) <= target:
                hi = mid
            else:
                lo = mid + 1
        best = min((k for k in (lo - 1, lo) if 0 <= k <= words),
                   key=lambda k: abs(exact_jaccard(base, variant(k)) - target))
        v = variant(best)
        j = exact_jaccard(base, v)
        if abs(j - target) <= tolerance:
            return " ".join(base), " ".join(v), j
