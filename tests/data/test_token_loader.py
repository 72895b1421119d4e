"""TokenLoader: every token once per epoch with its boundaries, exact resume across world sizes and
worker counts, determinism, mixing and bad input. References: the synthetic documents themselves and
a plain-Python SplitMix64."""
from __future__ import annotations

import collections
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from luminamoon import _native  # noqa: E402
from luminamoon.data import DataError, TokenLoader  # noqa: E402
from luminamoon.data.token_loader import seeded_permutation  # noqa: E402

if not hasattr(_native, "_TokenShardWriter"):
    pytest.skip("built without token shards", allow_module_level=True)

EOS = 1
L = 16


def make_docs(seed: int, n: int, vocab: int = 5000, long_every: int = 9) -> list[np.ndarray]:
    """Documents of 1..40 tokens ending with EOS; every long_every-th is longer than 3 sequences."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        length = int(rng.integers(1, 40)) if i % long_every else 3 * L + 5
        body = rng.integers(2, vocab, size=length - 1, dtype=np.uint32)
        docs.append(np.concatenate([body, [EOS]]).astype(np.uint32))
    return docs


def write_shards(path, docs, shard_max_tokens=120) -> None:
    w = _native._TokenShardWriter(str(path), 2, shard_max_tokens, "{}")
    w.discard_uncommitted(0)
    for d in docs:
        w.add_documents(d, np.array([len(d)], dtype=np.uint64))
        if w.shard_full:
            w.write_shard()
    if not w.shard_empty:
        w.write_shard()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    a, b = make_docs(1, 60), make_docs(2, 25)
    write_shards(root / "a", a)
    write_shards(root / "b", b)
    (root / "empty").mkdir()
    write_shards(root / "empty", [])
    return root, a, b


def rows_of(loader):
    """{sample_index: (input_ids, position_ids, segment_ids)} and the order the samples came in."""
    got, order = {}, []
    for batch in loader:
        for k, a in enumerate(batch["sample_index"].tolist()):
            assert a not in got, f"sample {a} yielded twice"
            got[a] = tuple(batch[key][k].numpy().copy() for key in ("input_ids", "position_ids", "segment_ids"))
            order.append(a)
    return got, order


def segments(ids, seg):
    return [ids[seg == s] for s in range(int(seg.max()) + 1)] if (seg >= 0).any() else []


def test_unshuffled_epoch_is_the_documents_in_order_with_their_boundaries(corpus):
    root, a, _ = corpus
    got, order = rows_of(TokenLoader(root / "a", L, 4, shuffle=False))
    assert order == list(range(len(order)))
    stream = np.concatenate(a)
    assert len(order) == -(-len(stream) // L)
    # Reference positions and document numbers, from the documents' lengths alone.
    doc_of = np.repeat(np.arange(len(a)), [len(d) for d in a])
    starts = np.concatenate([[0], np.cumsum([len(d) for d in a])])[doc_of]
    for q in order:
        ids, pos, seg = got[q]
        lo, hi = q * L, min((q + 1) * L, len(stream))
        n = hi - lo
        np.testing.assert_array_equal(ids[:n], stream[lo:hi])
        np.testing.assert_array_equal(pos[:n], np.arange(lo, hi) - np.maximum(starts[lo:hi], lo))
        np.testing.assert_array_equal(seg[:n], doc_of[lo:hi] - doc_of[lo])
        assert (seg[n:] == -1).all() and (ids[n:] == 0).all()


def test_shuffled_epoch_has_every_token_once_and_whole_documents_intact(corpus):
    root, a, _ = corpus
    got, _ = rows_of(TokenLoader(root / "a", L, 5, seed=7, shuffle_window=4))
    tokens = collections.Counter()
    whole = {tuple(d.tolist()) for d in a}
    complete = 0
    for ids, pos, seg in got.values():
        tokens.update(ids[seg >= 0].tolist())
        for part, p in zip(segments(ids, seg), segments(pos, seg)):
            if p[0] == 0 and part[-1] == EOS and tuple(part.tolist()) in whole:
                complete += 1
            assert (np.diff(p) == 1).all()  # positions count up inside a document
    assert tokens == collections.Counter(np.concatenate(a).tolist())
    assert complete >= len([d for d in a if len(d) < L]) // 2  # most short documents sit whole in a row


def test_document_longer_than_a_sequence_is_split_with_its_boundary(corpus):
    root, a, _ = corpus
    got, _ = rows_of(TokenLoader(root / "a", L, 4, shuffle=False))
    long_doc = a[0]  # 3L + 5 tokens, the stream's first document
    assert len(long_doc) > 3 * L
    rebuilt = np.concatenate([got[q][0][got[q][2] == 0] for q in range(4)])
    np.testing.assert_array_equal(rebuilt, long_doc)
    assert got[3][2][5] == 1 and got[3][1][5] == 0  # the next document starts right after its EOS


def _run(root, world, workers, seed, stop_after=None, state=None, epochs=1):
    """Per-rank (rows, order) of a run; with stop_after, each rank stops after that many batches."""
    ranks = []
    states = []
    for r in range(world):
        loader = TokenLoader([root / "a", root / "b"], L, 3, weights=[2.0, 1.0], rank=r, world_size=world,
                             num_workers=workers, seed=seed, shuffle_window=5, num_epochs=epochs)
        if state is not None:
            loader.load_state_dict(state)
        got, order = {}, []
        for k, batch in enumerate(loader):
            for j, a in enumerate(batch["sample_index"].tolist()):
                got[a] = batch["input_ids"][j].numpy().copy()
                order.append(a)
            if stop_after is not None and k + 1 == stop_after:
                break
        states.append(loader.state_dict())
        ranks.append((got, order))
    return ranks, states


@pytest.mark.parametrize("world_before,world_after", [(1, 1), (2, 2), (2, 4), (4, 1)])
@pytest.mark.parametrize("workers_before,workers_after", [(0, 3), (3, 1), (1, 0)])
def test_resume_yields_exactly_what_the_uninterrupted_run_had_left(corpus, world_before, world_after,
                                                                   workers_before, workers_after):
    root = corpus[0]
    epochs = 2 if (world_before, workers_before) == (2, 0) else 1  # one case crosses an epoch boundary
    full, _ = _run(root, world_before, 0, seed=3, epochs=epochs)
    full_rows = {a: ids for got, _ in full for a, ids in got.items()}
    first, states = _run(root, world_before, workers_before, seed=3, stop_after=2, epochs=epochs)
    assert all(s == states[0] for s in states), "every rank must save the same global state"
    before = {a for got, _ in first for a in got}
    resumed, _ = _run(root, world_after, workers_after, seed=3, state=states[0], epochs=epochs)
    after = [a for got, order in resumed for a in order]
    assert len(after) == len(set(after)), "a sample yielded twice after resume"
    assert before.isdisjoint(after)
    assert before | set(after) == set(full_rows), "a sample missed or invented"
    for got, _ in resumed:
        for a, ids in got.items():
            np.testing.assert_array_equal(ids, full_rows[a])
    if world_before == world_after:  # the same ranks: each rank's remaining stream, in order
        for r in range(world_after):
            remaining = [a for a in full[r][1] if a not in before]
            assert resumed[r][1] == remaining


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_with_the_same_worker_count(corpus, workers):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    from luminamoon.data import PackedSequenceOrder, PackedTokenDataset
    order = PackedSequenceOrder(corpus[0] / "a", L, seed=5, shuffle_window=3)

    def loader():
        dataset = PackedTokenDataset(order, 4, end=order.epoch_samples)  # one epoch (default: forever)
        return sdl.StatefulDataLoader(dataset, batch_size=None, num_workers=workers)

    full = [b["sample_index"].tolist() for b in loader()]
    dl = loader()
    it = iter(dl)
    head = [next(it)["sample_index"].tolist() for _ in range(3)]
    state = dl.state_dict()
    del it, dl
    dl2 = loader()
    dl2.load_state_dict(state)
    tail = [b["sample_index"].tolist() for b in dl2]
    assert head + tail == full


def _splitmix64_reference(x: int) -> int:
    """SplitMix64's finalizer (Steele et al.), written independently of the loader."""
    m = (1 << 64) - 1
    z = x & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_seeded_permutation_is_splitmix_keys_sorted():
    words = (7, 1, 0, 2)
    h = 0x9E3779B97F4A7C15
    for w in words:
        h = _splitmix64_reference(h ^ w)
    keys = [_splitmix64_reference(i ^ h) for i in range(50)]
    assert seeded_permutation(50, *words).tolist() == sorted(range(50), key=lambda i: (keys[i], i))
    assert _splitmix64_reference(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF  # the published first output


def test_same_seed_same_order_in_a_fresh_process(corpus):
    root = corpus[0]
    code = ("import sys; from luminamoon.data import TokenLoader;"
            "print([b['sample_index'].tolist() for b in TokenLoader(sys.argv[1], 16, 4, seed=11)])")
    env = dict(os.environ, PYTHONHASHSEED="123")
    out = subprocess.run([sys.executable, "-c", code, str(root / "a")], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    here = str([b["sample_index"].tolist() for b in TokenLoader(root / "a", 16, 4, seed=11)])
    assert out == here
    other = str([b["sample_index"].tolist() for b in TokenLoader(root / "a", 16, 4, seed=12)])
    rows = lambda s: [b["input_ids"].sum().item() for b in TokenLoader(root / "a", 16, 4, seed=s)]  # noqa: E731
    assert rows(11) == rows(11) and rows(11) != rows(12)
    assert here == other  # sample indices are positions; the contents differ by seed


def test_mixing_follows_the_weights_until_a_source_runs_out(corpus):
    root, a, b = corpus
    loader = TokenLoader([root / "a", root / "b"], L, 6, weights=[2.0, 1.0], seed=0)
    sources = np.concatenate([batch["source"].numpy() for batch in loader])
    n_a, n_b = -(-sum(map(len, a)) // L), -(-sum(map(len, b)) // L)
    assert (sources == 0).sum() == n_a and (sources == 1).sum() == n_b
    head = sources[:3 * min(n_b, n_a // 2)]
    assert abs((head == 0).sum() - 2 * (head == 1).sum()) <= 2


def test_bad_input_is_a_clear_error(corpus, tmp_path):
    root = corpus[0]
    with pytest.raises(DataError, match="holds no tokens") as e:
        TokenLoader([root / "a", root / "empty"], L, 2)
    assert e.value.exit_code == 3
    TokenLoader([root / "a", root / "empty"], L, 2, skip_empty_sources=True)
    with pytest.raises(DataError, match="weight"):
        TokenLoader([root / "a"], L, 2, weights=[0.0])
    with pytest.raises(DataError, match="no manifest.json"):
        TokenLoader(tmp_path, L, 2)
    with pytest.raises(DataError, match="outside world_size"):
        TokenLoader(root / "a", L, 2, rank=2, world_size=2)
    state = TokenLoader(root / "a", L, 2, seed=1).state_dict()
    with pytest.raises(DataError, match="other sources or settings") as e:
        TokenLoader(root / "a", L, 2, seed=2).load_state_dict(state)
    assert e.value.exit_code == 5
    # A shard damaged after the manifest was written.
    import shutil
    shutil.copytree(root / "a", tmp_path / "a")
    shard = tmp_path / "a" / "shard-00000000.tok"
    data = bytearray(shard.read_bytes())
    data[70] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(DataError, match="CRC32"):
        TokenLoader(tmp_path / "a", L, 2, verify=True)
