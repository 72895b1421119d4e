"""The stochastic-rounding hash against a Python-integer evaluation of the spec."""
from __future__ import annotations

import numpy as np

from luminamoon import _native
from luminav_reference import MASK64, rounding_bits


def _native_bits(seeds, steps, indices):
    arr = lambda a: np.ascontiguousarray(a, dtype=np.uint64)
    return _native._core_rounding_bits(arr(seeds), arr(steps), arr(indices))


def test_hash_matches_python_integers_on_edge_and_random_counters(rng):
    edges = [0, 1, 2, 3, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 63, MASK64 - 1, MASK64]
    triples = [(s, t, i) for s in edges for t in edges[:6] + [MASK64] for i in edges]
    triples += [tuple(int(v) for v in rng.integers(0, 1 << 63, 3, dtype=np.uint64) * 2 + 1)
                for _ in range(2000)]
    seeds, steps, indices = zip(*triples)
    got = _native_bits(seeds, steps, indices)
    want = np.array([rounding_bits(*t) for t in triples], dtype=np.uint32)
    np.testing.assert_array_equal(got, want)


def test_hash_known_answers_written_out():
    # Evaluated by hand from the spec's recipe with Python integers.
    z = 0  # seed = t = i = 0: z stays 0 through every xor-shift and multiply
    assert rounding_bits(0, 0, 0) == z
    assert _native_bits([0], [0], [0])[0] == 0
    # seed=1, t=0, i=0: z = 0x9E3779B97F4A7C15 then the finaliser.
    z = 0x9E3779B97F4A7C15
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & MASK64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    assert _native_bits([1], [0], [0])[0] == z >> 32
    # The counters wrap modulo 2^64: seed 2^64-1 == -1, so (2^64-1, 0, 1) sums
    # to 0x94D0.. - 0x9E37.. mod 2^64.
    assert _native_bits([MASK64], [0], [1])[0] == rounding_bits(MASK64, 0, 1)


def test_hash_bits_look_uniform(rng):
    # 2^16 consecutive indices: each of the 32 output bits is set about half the time.
    n = 1 << 16
    bits = _native_bits(np.full(n, 12345), np.full(n, 7), np.arange(n))
    ones = np.unpackbits(bits.view(np.uint8)).reshape(n, 32).mean(axis=0)
    assert np.all(np.abs(ones - 0.5) < 5 * 0.5 / np.sqrt(n)), ones
    assert len(np.unique(bits)) > n * 0.999
