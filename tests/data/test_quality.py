"""QualityFilter (luminamoon.data.filter_quality) against an independent pure-Python reference of the spec."""
from __future__ import annotations

import math
import os
import random
import re
import string
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from luminamoon import data

# --- the reference, written from the spec and the header's definitions ------------------------

WHITE_SPACE = "".join(map(chr, [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                                0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))
_WORD = re.compile("[^" + re.escape(WHITE_SPACE) + "]+")
ALPHA_RANGES = [(0x41, 0x5A), (0x61, 0x7A), (0xAA, 0xAA), (0xB5, 0xB5), (0xBA, 0xBA), (0xC0, 0xD6), (0xD8, 0xF6),
                (0xF8, 0x2AF), (0x370, 0x1FFF), (0x2C00, 0x2DFF), (0x3040, 0x31FF), (0x3400, 0x4DBF),
                (0x4E00, 0xD7FF), (0xF900, 0xFDFF), (0xFE70, 0xFEFE), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A),
                (0xFF66, 0xFFDC), (0x10000, 0x1CFFF), (0x1D400, 0x1EFFF), (0x20000, 0x3FFFF)]
STOP_WORDS = {"the", "be", "to", "of", "and", "that", "have", "with"}

# (threshold name, metric, is_minimum, default): Rae et al. 2021 and the spec.
CHECKS = [
    ("min_entropy", "entropy", True, 3.0),
    ("min_words", "word_count", True, 50), ("max_words", "word_count", False, 100000),
    ("min_mean_word_length", "mean_word_length", True, 3), ("max_mean_word_length", "mean_word_length", False, 10),
    # "greater than 0.1 for either the hash symbol or the ellipsis" (Rae et al. 2021): two checks.
    ("max_hash_word_ratio", "hash_word_ratio", False, 0.1),
    ("max_ellipsis_word_ratio", "ellipsis_word_ratio", False, 0.1),
    ("max_bullet_line_frac", "bullet_line_frac", False, 0.9),
    ("max_ellipsis_line_frac", "ellipsis_line_frac", False, 0.3),
    ("min_alpha_word_frac", "alpha_word_frac", True, 0.8),
    ("min_stop_words", "stop_word_count", True, 2),
    ("max_dup_line_frac", "dup_line_frac", False, 0.30), ("max_dup_para_frac", "dup_para_frac", False, 0.30),
    ("max_dup_line_char_frac", "dup_line_char_frac", False, 0.20),
    ("max_dup_para_char_frac", "dup_para_char_frac", False, 0.20),
    ("max_top_2gram_char_frac", "top_2gram_char_frac", False, 0.20),
    ("max_top_3gram_char_frac", "top_3gram_char_frac", False, 0.18),
    ("max_top_4gram_char_frac", "top_4gram_char_frac", False, 0.16),
] + [(f"max_dup_{n}gram_char_frac", f"dup_{n}gram_char_frac", False, round(0.15 - 0.01 * (n - 5), 2))
     for n in range(5, 11)]


def is_alpha(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in ALPHA_RANGES)


def ratio(a, b):
    return a / b if b else 0.0


def duplicates(elements):
    seen, dups, chars = set(), 0, 0
    for e in elements:
        if e in seen:
            dups += 1
            chars += len(e)
        seen.add(e)
    return dups, chars


def ngram_char_frac(words, n, top_only):
    total = sum(len(w) for w in words)
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    counts = Counter(grams)
    if top_only:
        best = max(counts.values())
        if best < 2:
            return 0.0
        target = next(g for g in grams if counts[g] == best)
        starts = [i for i, g in enumerate(grams) if g == target]
    else:
        starts = [i for i, g in enumerate(grams) if counts[g] >= 2]
    covered = {k for i in starts for k in range(i, i + n)}
    return ratio(sum(len(words[k]) for k in covered), total)


def reference_metrics(text: str) -> dict[str, float]:
    words = _WORD.findall(text)
    n_words = len(words)
    counts = Counter(text)
    total = len(text)
    entropy = -sum(c / total * math.log2(c / total) for c in counts.values()) if total else 0.0
    lines = text.split("\n")
    if text.endswith("\n"):  # a final newline ends the last line, it starts no empty one (spec v2)
        lines.pop()
    m = {
        "entropy": entropy,
        "word_count": n_words,
        "mean_word_length": ratio(sum(len(w) for w in words), n_words),
        "hash_word_ratio": ratio(text.count("#"), n_words),
        "ellipsis_word_ratio": ratio(text.count("...") + text.count("\u2026"), n_words),
        "bullet_line_frac": ratio(sum(l.lstrip(WHITE_SPACE).startswith(("\u2022", "-", "*")) for l in lines), len(lines)),
        "ellipsis_line_frac": ratio(sum(l.rstrip(WHITE_SPACE).endswith(("...", "\u2026")) for l in lines), len(lines)),
        "alpha_word_frac": ratio(sum(any(is_alpha(c) for c in w) for w in words), n_words),
        "stop_word_count": sum(
            "".join(c.lower() if c.isascii() else c for c in w.strip(string.punctuation)) in STOP_WORDS for w in words),
    }
    line_elems = [l for l in lines if l]
    paras = [p for p in re.split(r"\n{2,}", text) if p]
    d, c = duplicates(line_elems)
    m["dup_line_frac"], m["dup_line_char_frac"] = ratio(d, len(line_elems)), ratio(c, total)
    d, c = duplicates(paras)
    m["dup_para_frac"], m["dup_para_char_frac"] = ratio(d, len(paras)), ratio(c, total)
    for n in (2, 3, 4):
        m[f"top_{n}gram_char_frac"] = ngram_char_frac(words, n, True)
    for n in range(5, 11):
        m[f"dup_{n}gram_char_frac"] = ngram_char_frac(words, n, False)
    return m


def reference_decision(m, bounds):
    for name, metric, is_min, _ in CHECKS:
        b = bounds.get(name)
        if b is None:
            continue
        if (m[metric] < b) if is_min else (m[metric] > b):
            return name
    return None


# --- a generated corpus -----------------------------------------------------------------------

VOCAB = ("the of and to in is that with for have be on as it was by this are from at an or which one all "
         "river model data system people water history music garden winter language market science city "
         "quickly bright simple ancient careful open small large green north written number").split()
EXOTIC = ["café", "naïve", "Straße", "東京", "данные", "😀", "x²", "—", "“quoted”", "#tag", "…", "...", "$100",
          "2024", "e-mail", "U.S.", "ℕ", "Ω", "(see", "note)"]


def sentence(rng, n=None):
    n = n or rng.randint(4, 18)
    ws = [rng.choice(VOCAB) if rng.random() > 0.08 else rng.choice(EXOTIC) for _ in range(n)]
    ws[0] = ws[0].capitalize()
    return " ".join(ws) + rng.choice([".", ".", ".", "!", "?", "...", ":", ""])


def natural(rng):
    paras = []
    for _ in range(rng.randint(1, 6)):
        paras.append(" ".join(sentence(rng) for _ in range(rng.randint(1, 6))))
    return "\n\n".join(paras)


def boilerplate(rng):
    lines = ["Home | About | Contact", "Click here to subscribe to our newsletter.", "All rights reserved.",
             "Privacy policy", "Share this article"]
    body = [sentence(rng) for _ in range(rng.randint(0, 5))]
    return "\n".join(rng.sample(lines, rng.randint(2, 5)) * rng.randint(1, 4) + body)


def repeated(rng):
    line = sentence(rng)
    out = [line if rng.random() < 0.5 else sentence(rng) for _ in range(rng.randint(3, 30))]
    return rng.choice(["\n", "\n\n"]).join(out)


def symbol_spam(rng):
    toks = [rng.choice(["#", "##", "#hashtag", "...", "…", "!!!", "***", "-", rng.choice(VOCAB)]) for _ in range(rng.randint(5, 120))]
    return " ".join(toks)


def bullets(rng):
    mark = rng.choice(["-", "*", "•", "  -", "\t•"])
    items = [f"{mark} {sentence(rng, rng.randint(2, 8))}" for _ in range(rng.randint(2, 25))]
    if rng.random() < 0.5:
        items.insert(0, sentence(rng))
    return "\n".join(items)


def odd(rng):
    return rng.choice(["", " ", "\n\n\n", "a", "aaaa " * rng.randint(1, 80), "ab" * rng.randint(1, 500),
                       "word\u00a0word\u2003word\u3000" * 10, "...\n…\n" * 5, "the be to of and that have with " * 10,
                       " ".join(sentence(rng) for _ in range(40)) + "...\n" * 20])


def corpus(n=2400, seed=1234):
    rng = random.Random(seed)
    kinds = [natural, natural, natural, boilerplate, repeated, symbol_spam, bullets, odd]
    return [rng.choice(kinds)(rng) for _ in range(n)]


@pytest.fixture(scope="module")
def docs():
    return corpus()


@pytest.fixture(scope="module")
def result(docs):
    return data.filter_quality(docs)


def test_checks_table_matches_spec():
    got = data.quality_checks()
    assert [(c[0], c[1], c[2]) for c in got] == [(c[0], c[1], c[2]) for c in CHECKS]
    for (name, _, _, default), (_, _, _, ours) in zip(CHECKS, got):
        assert ours == pytest.approx(default), name


def test_metrics_match_reference(docs, result):
    table = result.metrics
    assert isinstance(table, pa.Table)
    assert table.num_rows == len(docs)
    assert set(table.column_names) == {c[1] for c in CHECKS}
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    for i, doc in enumerate(docs):
        ref = reference_metrics(doc)
        for name, expected in ref.items():
            got = cols[name][i]
            assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12), (i, name, got, expected, doc[:200])


def test_decisions_match_reference(docs, result):
    defaults = {c[0]: c[3] for c in CHECKS}
    expected = [reference_decision(reference_metrics(d), defaults) for d in docs]
    assert result.reason == expected
    assert isinstance(result.keep, np.ndarray) and result.keep.dtype == np.bool_
    assert result.keep.tolist() == [r is None for r in expected]
    # The corpus exercises many different checks and keeps some documents.
    assert len(set(expected)) >= 10
    assert 0 < result.keep.sum() < len(docs)


def test_custom_thresholds_and_disabling(docs):
    sub = docs[:400]
    bounds = {"min_entropy": None, "min_words": 5, "max_dup_line_frac": 0.5, "min_stop_words": None,
              "max_top_2gram_char_frac": 0.3}
    r = data.filter_quality(sub, **bounds)
    full = {c[0]: c[3] for c in CHECKS}
    full.update(bounds)
    assert r.reason == [reference_decision(reference_metrics(d), full) for d in sub]
    everything_off = data.filter_quality(sub, **{c[0]: None for c in CHECKS})
    assert everything_off.keep.all() and set(everything_off.reason) == {None}


def test_input_kinds(docs):
    sub = docs[:50]
    a = data.filter_quality(sub)
    for texts in (pa.array(sub), [d.encode() for d in sub], data.StringTensor(sub)):
        b = data.filter_quality(texts)
        assert b.reason == a.reason and b.metrics.equals(a.metrics)


@pytest.mark.parametrize("kwargs, err, match", [
    ({"min_wrods": 3}, ValueError, "did you mean 'min_words'"),
    ({"min_words": -1}, ValueError, ">= 0"),
    ({"min_entropy": float("nan")}, ValueError, "finite"),
    ({"max_dup_line_frac": 1.5}, ValueError, r"\[0, 1\]"),
    ({"min_words": 500, "max_words": 100}, ValueError, "exceeds"),
    ({"min_words": "50"}, TypeError, "number"),
    ({"min_words": True}, TypeError, "number"),
])
def test_bad_thresholds(kwargs, err, match):
    with pytest.raises(err, match=match):
        data.filter_quality(["some text"], **kwargs)


def test_invalid_utf8_reads_as_replacement():
    r = data.filter_quality([b"ab\xff cd"], min_entropy=None)
    ref = reference_metrics(b"ab\xff cd".decode("utf-8", "replace"))
    assert r.metrics.column("entropy")[0].as_py() == pytest.approx(ref["entropy"])
    assert r.metrics.column("word_count")[0].as_py() == 2


def test_stop_words_and_word_edges_corner_cases():
    # Stop words in every case, with punctuation around them, and near misses whose bytes
    # OR 0x20 would turn into letters ('@' -> '`', '[' -> '{') or that are one letter off;
    # words and White_Space runs placed across the 64-byte blocks of the word scan.
    words = ["THE", "tHaT", "With", "be", "To", "oF", "AND", "hAvE", "the.", "(the)", "--and--", "'to'",
             "the's", "T@E", "th", "thee", "then", "[of]", "of[", "aNd!", "hav", "withs", "wit", "TO",
             "b e", "t\u00e9", "\u00e9the", "th\u00e9", "x" * 63, "the", "y" * 64, "of", "z" * 65, "and",
             # long punctuation around a stop word (63 and 83 bytes), and NUL bytes next to one
             "(" * 30 + "the" + ")" * 30, "\"" * 40 + "With" + "!" * 39, "(" * 70 + "x" + ")",
             "the\0", "\0the", "of\0", "with\0", "(and\0)", "be\0\0"]
    docs = []
    for sep in (" ", "  ", "\t", "\u2003", "\n", " \u00a0 "):
        for shift in range(0, 9):
            docs.append("w" * shift + sep + sep.join(words) + sep + "end")
    docs.append("the")  # one word exactly at the end of the text
    docs.append("x" * 64)  # a word filling one block
    docs.append(" " * 64 + "of")  # a word starting a block
    table = data.filter_quality(docs).metrics
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    for i, doc in enumerate(docs):
        ref = reference_metrics(doc)
        for name, expected in ref.items():
            assert math.isclose(cols[name][i], expected, rel_tol=1e-9, abs_tol=1e-12), (i, name, doc[:80])


def test_gopher_details_of_spec_v2():
    # A final newline starts no extra line; '#' and the ellipsis are checked each on its own.
    rng = random.Random(7)
    docs = [natural(rng) + "\n" for _ in range(60)] + [bullets(rng) + "\n" for _ in range(60)]
    docs += ["- one...\n- two\n", "x...\n\n", "\n", "...\n"]
    table = data.filter_quality(docs).metrics
    for i, doc in enumerate(docs):
        ref = reference_metrics(doc)
        for name in ("bullet_line_frac", "ellipsis_line_frac", "hash_word_ratio", "ellipsis_word_ratio"):
            assert math.isclose(table.column(name)[i].as_py(), ref[name], rel_tol=1e-9, abs_tol=1e-12), (i, name, doc)
    assert table.column("ellipsis_line_frac")[len(docs) - 4].as_py() == 0.5  # "- one...", "- two"
    words = ["river", "garden", "the", "of"] * 25  # 100 words
    both = " ".join(("#" + w if i < 8 else w) + ("..." if 50 <= i < 58 else "") for i, w in enumerate(words))
    only_hash = " ".join(("#" + w if i < 11 else w) for i, w in enumerate(words))
    r = data.filter_quality([both, only_hash], **{c[0]: None for c in CHECKS if "gram" in c[0] or "dup" in c[0]})
    assert r.reason == [None, "max_hash_word_ratio"]


# --- verdicts without metrics (Note [verdict only]) -------------------------------------------

@pytest.fixture(scope="module")
def reference(docs):
    sub = docs[:800]
    return sub, [reference_metrics(d) for d in sub]


def _bound_between(ref_metrics, metric, quantile):
    """A bound near the quantile of the reference metric, halfway between two distinct values (a bound
    equal to a document's value would make its verdict hang on the last bit of a float)."""
    values = sorted(set(m[metric] for m in ref_metrics))
    k = min(int(quantile * (len(values) - 1)), len(values) - 2)
    return (values[k] + values[k + 1]) / 2


def _bounds_failing_some(ref_metrics, rng):
    """Every check at a bound that some documents fail: near a random quantile of the reference metric, a
    minimum below the median and a maximum above it (a minimum may not exceed its maximum)."""
    return {name: _bound_between(ref_metrics, metric, rng.uniform(0.05, 0.45) if is_min else rng.uniform(0.55, 0.95))
            for name, metric, is_min, _ in CHECKS}


def test_verdicts_without_metrics_match_reference(reference):
    sub, ref = reference
    rng = random.Random(11)
    configs = [{c[0]: c[3] for c in CHECKS}]  # the defaults
    # Each check alone: the verdict is decided in that check's own phase (words and lines,
    # duplicates, or the n-gram size), with every earlier phase passing.
    for name, metric, _, _ in CHECKS:
        bound = _bound_between(ref, metric, 0.5)
        configs.append({c[0]: (bound if c[0] == name else None) for c in CHECKS})
    configs += [_bounds_failing_some(ref, rng) for _ in range(6)]
    # Only the n-gram checks, tight: documents fail at every size from 2 to 10.
    configs.append({c[0]: (0.0 if "gram" in c[0] else None) for c in CHECKS})
    seen = set()
    for bounds in configs:
        expected = [reference_decision(m, bounds) for m in ref]
        r = data.filter_quality(sub, metrics=False, **bounds)
        assert r.metrics is None
        assert r.reason == expected, bounds
        assert r.keep.tolist() == [e is None for e in expected]
        full = data.filter_quality(sub, **bounds)  # and the same as with the metrics
        assert full.reason == expected
        seen.update(e for e in expected if e)
    assert seen == {c[0] for c in CHECKS}  # every check decided some document


def test_metrics_flag_must_be_a_bool():
    with pytest.raises(TypeError, match="metrics"):
        data.filter_quality(["some text"], metrics="no")


def test_pipeline_without_metrics_drops_for_the_reference_reasons(tmp_path, reference):
    import json
    from luminamoon.data.pipeline import FusedPipeline
    sub, ref = reference
    with open(tmp_path / "in.jsonl", "w") as f:
        for i, d in enumerate(sub):
            f.write(json.dumps({"id": f"d{i}", "text": d}) + "\n")
    rng = random.Random(5)
    for k, bounds in enumerate([{c[0]: c[3] for c in CHECKS}, _bounds_failing_some(ref, rng)]):
        out = tmp_path / f"out{k}"
        FusedPipeline(format="ndjson", clean=False, dedup=False, minhash=False, pii=False, write_dropped=True,
                      quality_thresholds=bounds).run([str(tmp_path / "in.jsonl")], str(out), resume=False)
        got = {}
        for directory in (out, out / "dropped"):
            for name in sorted(os.listdir(directory)):
                if name.endswith(".ndjson"):
                    for line in open(directory / name):
                        row = json.loads(line)
                        got[row["id"]] = row.get("reason") if directory != out else None
        assert got == {f"d{i}": reference_decision(m, bounds) for i, m in enumerate(ref)}
