"""MinHash signatures and the streaming LSH against a Python reference written
from the spec (dedup_reference.py), estimated vs exact Jaccard within the
binomial bound, determinism, index persistence and error paths."""
from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("xxhash")
data = pytest.importorskip("luminamoon.data")
if not hasattr(data, "MinHashLSH"):
    pytest.skip("luminamoon built without MinHash LSH", allow_module_level=True)

import dedup_reference as ref  # noqa: E402

VOCAB = ["alpha", "Beta", "gamma,", "DELTA", "eps.", "zeta", "éta", "θήτα", "iota!", "kappa",
         "lambda\u2014mu", "nu\u2019s", "xi", "omicron", "pi", "rho", "sigma;", "tau", "upsilon", "phi"]


def random_text(rng: random.Random, words: int) -> str:
    seps = [" ", " ", " ", "  ", "\n", "\t", " - ", "\u00a0", "\u3000"]
    return "".join(rng.choice(VOCAB) + str(rng.randrange(30)) + rng.choice(seps) for _ in range(words))


def texts_for_tests(n: int = 40, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["", "one", "Two words", "exactly five words here now", "...,,,"]
    out += [random_text(rng, rng.randint(1, 150)) for _ in range(n)]
    return out


def test_permutations_follow_the_documented_splitmix64():
    lsh = data.MinHashLSH(num_perm=64)
    a, b = lsh.permutations()
    ra, rb = ref.permutations(64, seed=1)
    assert a.tolist() == ra and b.tolist() == rb
    a7, _ = data.MinHashLSH(num_perm=16, bands=2, rows=8, seed=7).permutations()
    assert a7.tolist() == ref.permutations(16, seed=7)[0]


def test_shingles_are_reference_word_ngrams():
    lsh = data.MinHashLSH(ngram=3)
    for t in texts_for_tests(10):
        assert lsh.shingle_hashes(t).tolist() == ref.shingle_hashes(t, 3), t


@pytest.mark.parametrize("scheme,num_perm,ngram,seed", [
    ("kperm", 64, 5, 1), ("kperm", 128, 3, 42), ("kperm", 20, 1, 5),
    ("oph", 64, 5, 1), ("oph", 128, 3, 42), ("oph", 256, 5, 7), ("oph", 16, 1, 5), ("oph", 1, 2, 3)])
def test_signatures_equal_the_python_reference(scheme, num_perm, ngram, seed):
    bands = 4 if num_perm % 4 == 0 else 1
    lsh = data.MinHashLSH(num_perm=num_perm, bands=bands, rows=max(1, num_perm // bands // 2), ngram=ngram,
                          seed=seed, scheme=scheme)
    texts = texts_for_tests(25, seed=num_perm)
    sigs = lsh.signatures(texts)
    assert sigs.dtype == np.uint64 and sigs.shape == (len(texts), num_perm)
    for t, row in zip(texts, sigs):
        assert row.tolist() == ref.signature(t, num_perm, ngram, seed, scheme), t
    # The vector kernel (Highway) and the scalar kernel agree bit for bit.
    assert np.array_equal(sigs, lsh._reference_signatures(texts))


def test_oph_densification_is_exercised_and_follows_the_reference():
    # Documents with fewer shingles than bins: most bins are filled by densification.
    lsh = data.MinHashLSH(num_perm=256, bands=16, rows=16)
    texts = ["one", "two words here", " ".join(f"w{i}" for i in range(30)), " ".join(f"v{i}" for i in range(300))]
    sigs = lsh.signatures(texts)
    for t, row in zip(texts, sigs):
        expected = ref.oph_signature(t, 256)
        assert row.tolist() == expected
        assert (row != (1 << 64) - 1).all()  # no bin left empty
    # One shingle: every bin borrowed from the single filled one.
    assert len(set(sigs[0].tolist())) == 1
    assert 1 < len(set(sigs[2].tolist())) <= 26  # 26 shingles fill at most 26 distinct values


def block_edge_texts() -> list[bytes]:
    """Texts at the normalization's block and vector edges: empty, separators
    only, fewer words than one shingle, more word starts in a 64-byte block
    than any fast path writes at once, bytes >= 0x80 inside words at and
    around a vector's end (valid and broken UTF-8), multi-byte separators
    across a block boundary."""
    out = [b"", b" ", b"\t\n \r", b",.;:!?" * 20, b"one", b"two Words", b"four words, no more", b"x" * 200]
    for n in (17, 33, 64, 65, 130):
        out.append(b" ".join(bytes([97 + i % 26]) for i in range(n)))  # one-letter words: 32 starts a block
    for offset in (0, 13, 15, 16, 31, 32, 62, 63, 64, 65, 127):
        pad = b"Pad words go here " * 8
        for mid in (b"caf\xc3\xa9s", b"na\xef\xbf\xbdve", b"x\xe2\x80", b"\xe2\x80\x94dash", b"\xff\xfeZ",
                    b"\xe3\x80\x80ideo", b"A\xc2\xa0b", b"\xe2\x81\xb0sup"):
            out.append(pad[:offset] + mid + b" Tail Of The Text here")
    return out


@pytest.mark.parametrize("scheme", ["oph", "kperm"])
def test_signatures_at_block_and_byte_edges_equal_the_python_reference(scheme):
    lsh = data.MinHashLSH(scheme=scheme)
    texts = block_edge_texts()
    sigs = lsh.signatures(texts)
    for t, row in zip(texts, sigs):
        assert row.tolist() == ref.signature(t, 64, 5, 1, scheme), t
        assert lsh.shingle_hashes(t).tolist() == ref.shingle_hashes(t, 5), t
        assert data.dedup_normalize(t) == ref.normalize(t), t


def test_an_index_of_one_scheme_is_refused_by_the_other(tmp_path):
    for written, other in (("oph", "kperm"), ("kperm", "oph")):
        path = tmp_path / f"{written}.lsh"
        lsh = data.MinHashLSH(path=path, scheme=written)
        lsh.add(texts_for_tests(10))
        lsh.close()
        with pytest.raises(ValueError, match=f"scheme {written}; this run uses {other}"):
            data.MinHashLSH(path=path, scheme=other)
        assert len(data.MinHashLSH(path=path, scheme=written)) > 0  # still readable by its own scheme
    with pytest.raises(ValueError, match="power of two"):
        data.MinHashLSH(num_perm=100, bands=10, rows=10)
    with pytest.raises(ValueError, match="unknown scheme 'ohp'"):
        data.MinHashLSH(scheme="ohp")


def test_signatures_do_not_depend_on_threads_runs_or_input_kind():
    pa = pytest.importorskip("pyarrow")
    texts = texts_for_tests(300, seed=3)
    lsh = data.MinHashLSH()
    one = lsh.signatures(texts, num_threads=1)
    assert np.array_equal(one, lsh.signatures(texts, num_threads=2))
    assert np.array_equal(one, data.MinHashLSH().signatures(pa.array(texts, pa.large_string())))
    assert np.array_equal(one, lsh.signatures([t.encode() for t in texts]))
    assert np.array_equal(one, lsh.signatures(data.StringTensor(texts)))
    # Another process (fresh permutation tables, fresh dispatch) gives the same bytes.
    code = ("import sys, hashlib, luminamoon.data as d; t=sys.stdin.read().split('\\x00');"
            "print(hashlib.sha256(d.MinHashLSH().signatures(t).tobytes()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], input="\x00".join(texts), text=True,
                         capture_output=True, check=True).stdout.strip()
    import hashlib

    assert out == hashlib.sha256(one.tobytes()).hexdigest()


def binomial_interval(n: int, p: float, alpha: float) -> tuple[int, int]:
    """Smallest [lo, hi] holding Binomial(n, p) with probability >= 1 - alpha (equal tails)."""
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    lo, tail = 0, 0.0
    while tail + pmf[lo] <= alpha / 2:
        tail += pmf[lo]
        lo += 1
    hi, tail = n, 0.0
    while tail + pmf[hi] <= alpha / 2:
        tail += pmf[hi]
        hi -= 1
    return lo, hi


def planted_pair(rng: random.Random, words: int, change: float) -> tuple[str, str]:
    base = [f"w{rng.randrange(10**9)}" for _ in range(words)]
    other = [f"x{rng.randrange(10**9)}" if rng.random() < change else w for w in base]
    return " ".join(base), " ".join(other)


@pytest.mark.parametrize("scheme", ["oph", "kperm"])
def test_estimated_jaccard_is_within_the_binomial_bound_of_the_exact_one(scheme):
    # Each signature position agrees with probability J (kperm: a min-wise
    # permutation; oph: a bin's minimum, or the borrowed bin's, of the union;
    # Shrivastava 2017), so equal positions ~ Binomial(64, J) for the bound.
    # (oph positions are not independent, which widens the spread slightly;
    # alpha is small enough for that.)
    rng = random.Random(11)
    lsh = data.MinHashLSH(num_perm=64, scheme=scheme)
    pairs = [planted_pair(rng, rng.randint(60, 200), rng.choice([0.0, 0.02, 0.05, 0.1, 0.2, 0.4]))
             for _ in range(120)]
    flat = [t for pair in pairs for t in pair]
    sigs = lsh.signatures(flat)
    alpha = 1e-5  # per pair; 120 pairs: a false alarm once in ~800 runs
    errors = []
    for i, (a, b) in enumerate(pairs):
        sa, sb = set(ref.shingle_hashes(a)), set(ref.shingle_hashes(b))
        exact = len(sa & sb) / len(sa | sb)
        matches = int(np.count_nonzero(sigs[2 * i] == sigs[2 * i + 1]))
        lo, hi = binomial_interval(64, exact, alpha)
        assert lo <= matches <= hi, f"pair {i}: exact J {exact:.3f}, {matches}/64 equal"
        assert data.estimated_jaccard(sigs[2 * i], sigs[2 * i + 1]) == matches / 64
        errors.append(matches / 64 - exact)
    # No bias: the mean error is within 4 standard errors of 0.
    assert abs(np.mean(errors)) <= 4 * math.sqrt(0.25 / 64 / len(pairs))


@pytest.mark.parametrize("tail_docs", [None, "7"])
def test_streaming_decisions_equal_the_reference_lsh(tail_docs, monkeypatch):
    # "7": all but the last 7 kept documents' band keys in runs on disk
    # (Note [band runs on disk]), ~25 runs: the decisions must not change.
    if tail_docs:
        monkeypatch.setenv("LUMINAMOON_LSH_TAIL_DOCS", tail_docs)
    rng = random.Random(21)
    docs = []
    for _ in range(150):
        a, b = planted_pair(rng, rng.randint(30, 120), rng.choice([0.0, 0.03, 0.08, 0.3]))
        docs += [a, b] if rng.random() < 0.7 else [a]
    rng.shuffle(docs)
    lsh = data.MinHashLSH(threshold=0.75)
    reference = ref.ReferenceLSH(8, 8, 0.75)
    keep, matched, sims = [], [], []
    for lo in range(0, len(docs), 64):
        k, m = lsh.add(docs[lo : lo + 64], refs=list(range(1000 + lo, 1000 + lo + len(docs[lo : lo + 64]))))
        keep += k.tolist()
        matched += m.tolist()
        sims += lsh.last_similarity.tolist()
    expected = [reference.add(ref.signature(t), 1000 + i) for i, t in enumerate(docs)]
    assert keep == [e[0] for e in expected]
    assert matched == [e[1] for e in expected]
    assert sims == pytest.approx([e[2] for e in expected])
    assert 0 < sum(1 for k in keep if not k) < len(docs)  # the case is not trivial
    assert len(lsh) == sum(keep)


def test_index_persists_and_a_resumed_stream_decides_like_an_uninterrupted_one(tmp_path):
    rng = random.Random(8)
    docs = []
    for _ in range(120):
        a, b = planted_pair(rng, 80, rng.choice([0.0, 0.05, 0.5]))
        docs += [a, b]
    whole_keep, whole_matched = data.MinHashLSH().add(docs)
    # Default refs count the documents added to one object; across a resume the
    # caller passes its own (the pipeline: global row index).
    row = np.arange(len(docs))

    path = tmp_path / "index.lsh"
    first = data.MinHashLSH(path=path)
    k1, m1 = first.add(docs[:100], refs=row[:100])
    first.commit()
    checkpoint = first.committed_position
    first.add(docs[100:130], refs=row[100:130])  # processed after the checkpoint, flushed, then "crash"
    first.flush()
    first.close(commit=False)
    resumed = data.MinHashLSH(path=path, resume_position=checkpoint)
    assert resumed.replay_stats["records"] == int(k1.sum())
    assert resumed.replay_stats["cut_bytes"] > 0
    k2, m2 = resumed.add(docs[100:], refs=row[100:])
    assert np.array_equal(np.concatenate([k1, k2]), whole_keep)
    assert np.array_equal(np.concatenate([m1, m2]), whole_matched)
    resumed.close()
    with pytest.raises(ValueError, match="other options"):
        data.MinHashLSH(bands=4, rows=16, path=path)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF  # damage the last block: a torn tail, cut on open
    path.write_bytes(bytes(raw))
    reopened = data.MinHashLSH(path=path)
    assert reopened.replay_stats["cut_bytes"] > 0 and len(reopened) < int(whole_keep.sum())


def test_add_signatures_equals_add():
    texts = texts_for_tests(80, seed=9) * 2
    a = data.MinHashLSH()
    b = data.MinHashLSH()
    ka, ma = a.add(texts)
    kb, mb = b.add_signatures(b.signatures(texts))
    assert np.array_equal(ka, kb) and np.array_equal(ma, mb)
    assert not ka[len(texts) // 2 :].any()  # the second copy is all near (exact) duplicates


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(bands=9, rows=8), "bands \\* rows <= num_perm"),
        (dict(num_perm=0, bands=1, rows=1), "num_perm"),
        (dict(ngram=0), "ngram"),
        (dict(threshold=1.5), "threshold"),
        (dict(sync="maybe"), "sync"),
    ],
)
def test_bad_parameters_are_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        data.MinHashLSH(**kwargs)


def test_bad_inputs_are_refused_without_changing_the_index():
    lsh = data.MinHashLSH()
    with pytest.raises(ValueError):
        lsh.add_signatures(np.zeros((3, 32), dtype=np.uint64))
    with pytest.raises(ValueError):
        lsh.add(["a", "b"], refs=[1, 2, 3])
    with pytest.raises(TypeError):
        lsh.signatures("not a list")
    assert len(lsh) == 0 and lsh.documents_seen == 0
    with pytest.raises(ValueError):
        data.estimated_jaccard(np.zeros(3), np.zeros(4))


def test_empty_batches():
    lsh = data.MinHashLSH()
    assert lsh.signatures([]).shape == (0, 64)
    keep, matched = lsh.add([])
    assert keep.shape == (0,) and matched.shape == (0,)
    assert data.StreamDeduplicator().add([]).shape == (0,)


def test_signatures_release_the_gil():
    import threading
    import time

    tensor = data.StringTensor(texts_for_tests(2000, seed=13) * 12)  # ~15 MB of native work
    lsh = data.MinHashLSH()
    t0 = time.perf_counter()
    lsh.signatures(tensor, num_threads=1)
    serial = time.perf_counter() - t0
    done = threading.Event()
    worker = threading.Thread(target=lambda: (lsh.signatures(tensor, num_threads=1), done.set()))
    worker.start()
    last = time.perf_counter()
    longest_gap = 0.0
    while not done.is_set():  # this loop stalls for the whole call if the GIL is held
        now = time.perf_counter()
        longest_gap = max(longest_gap, now - last)
        last = now
    worker.join()
    assert longest_gap < serial / 2, (longest_gap, serial)


def test_pipeline_scheme_option(tmp_path):
    from luminamoon.data.pipeline import FusedPipeline

    base = " ".join(f"word{i}" for i in range(200))
    rows = [{"id": "a", "text": base}, {"id": "b", "text": base + " tail"}, {"id": "c", "text": "other " * 80}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(__import__("json").dumps(r) + "\n" for r in rows))
    raw = dict(clean=False, quality=False, dedup=False, pii=False, format="ndjson")
    for scheme in ("oph", "kperm"):
        summary = FusedPipeline(**raw, minhash_scheme=scheme).run([str(src)], tmp_path / scheme, resume=False)
        assert summary["dropped"] == {"minhash": {"near_duplicate": 1}}, (scheme, summary["dropped"])
    with pytest.raises(Exception, match="unknown scheme 'ohp'; known: oph, kperm"):
        FusedPipeline(**raw, minhash_scheme="ohp").run([str(src)], tmp_path / "bad", resume=False)


def test_band_keys_of_older_documents_leave_memory(monkeypatch):
    # Note [band runs on disk]: with a tail of 4,096 documents, the older ones
    # cost ~10 bytes of Bloom filter (8 bands x 10 bits, block rounding) and 8 of
    # ref (1.5x growth slack); the tail its tables and chains and one block of
    # signatures. A copy of a document in a run is still dropped against it.
    monkeypatch.setenv("LUMINAMOON_LSH_TAIL_DOCS", "4096")
    n = 50_000
    sigs = np.random.default_rng(4).integers(0, 2**61, size=(n, 64), dtype=np.uint64)
    lsh = data.MinHashLSH()
    keep, _ = lsh.add_signatures(sigs)
    assert keep.all() and len(lsh) == n
    tail = 4096 * (8 * 12 / 0.533 + 4 * 8 * 1.5) / n
    bound = 8 * 10 / 8 * 1.25 + 8 * 1.5 + tail + 4096 * 64 * 4 / n
    assert lsh.memory_bytes / n <= bound
    keep, matched = lsh.add_signatures(sigs[[7, 30_000, n - 1]], refs=[n, n + 1, n + 2])
    assert keep.tolist() == [False, False, False] and matched.tolist() == [7, 30_000, n - 1]


def test_the_index_keeps_signatures_out_of_memory():
    # Note [signatures on disk]: in memory only the band tables (8 bands of 12-byte
    # slots at load >= 0.533), chains and refs (40 bytes, 1.5x growth slack) and one
    # block of 4,096 signatures; the 256 bytes of verification values per kept
    # document are in the temporary file. Candidates still verify: a copy of a kept
    # signature is dropped against it.
    n = 50_000
    sigs = np.random.default_rng(3).integers(0, 2**61, size=(n, 64), dtype=np.uint64)
    lsh = data.MinHashLSH()
    keep, _ = lsh.add_signatures(sigs)
    assert keep.all() and len(lsh) == n
    bound = 8 * 12 / 0.533 + 40 * 1.5 + 4096 * 64 * 4 / n
    assert lsh.memory_bytes / n <= bound
    assert lsh.memory_bytes / n < 64 * 4  # under what the signatures alone took in memory
    keep, matched = lsh.add_signatures(sigs[[7, n - 1]], refs=[n, n + 1])
    assert keep.tolist() == [False, False] and matched.tolist() == [7, n - 1]
