"""TextCleaner (luminamoon.data.clean_batch) against an independent Python reference of the spec."""
from __future__ import annotations

import re
import time

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from luminamoon import data

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def reference_clean(raw: bytes, policy: str = "replace") -> str | None:
    """The spec's steps written with Python's own tools (None = dropped)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if policy == "drop":
            return None
        if policy == "error":
            raise
        # CPython's decoder replaces each maximal subpart with one U+FFFD (Unicode 3.9).
        text = raw.decode("utf-8", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = text.strip(" \t\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text


def _clean_one(raw: bytes, policy: str = "replace") -> str:
    return data.clean_batch([raw], invalid_utf8=policy)[0]


# Text built from the characters the cleaner acts on, plus ordinary and multi-byte ones.
_pieces = st.sampled_from(["a", "b", " ", "\t", "\n", "\r", "\r\n", "\x00", "\x01", "\x0b", "\x1f", "\x7f",
                           "é", "€", "😀", "\u00a0", "  ", "\n\n\n"])
texts = st.lists(_pieces, max_size=40).map("".join)
raw_bytes = st.one_of(st.binary(max_size=64), texts.map(lambda s: s.encode()),
                      st.tuples(texts, st.binary(max_size=4)).map(lambda t: t[0].encode() + t[1]))


@settings(max_examples=400, deadline=None)
@given(raw_bytes)
def test_matches_reference_and_is_idempotent(raw):
    out = _clean_one(raw)
    assert out == reference_clean(raw)
    assert _clean_one(out.encode()) == out
    out.encode("utf-8")  # valid UTF-8: would raise on a lone surrogate
    data.clean_batch([raw]).get_bytes(0).decode("utf-8")  # strict: the bytes themselves are valid


@settings(max_examples=200, deadline=None)
@given(st.lists(raw_bytes, max_size=30))
def test_batch_equals_per_document(docs):
    out, reasons = data.clean_batch(docs, with_reasons=True)
    assert len(out) == len(docs)
    for raw, got, why in zip(docs, out.to_pylist(), reasons):
        ref = reference_clean(raw)
        assert got == ref
        assert why == (None if ref else "empty")


# Unicode 15, section 3.9: one U+FFFD per maximal subpart of an ill-formed sequence.
R = "\ufffd"
INVALID = {
    "overlong_2": (b"a\xc0\xafb", "a" + R * 2 + "b"),         # C0 never starts a sequence
    "overlong_3": (b"a\xe0\x80\xafb", "a" + R * 3 + "b"),     # E0 needs A0..BF next
    "overlong_4": (b"a\xf0\x80\x80\xafb", "a" + R * 4 + "b"),
    "surrogate": (b"a\xed\xa0\x80b", "a" + R * 3 + "b"),      # ED needs 80..9F next
    "truncated_2of3": (b"a\xe2\x82b", "a" + R + "b"),         # E2 82 is one maximal subpart
    "truncated_3of4": (b"a\xf0\x9f\x98b", "a" + R + "b"),
    "truncated_at_end": (b"ab\xf0\x9f", "ab" + R),
    "above_10ffff": (b"a\xf4\x90\x80\x80b", "a" + R * 4 + "b"),  # F4 needs 80..8F next
    "f5_lead": (b"a\xf5\x80b", "a" + R * 2 + "b"),
    "lone_continuation": (b"a\x80\xbfb", "a" + R * 2 + "b"),
    "standard_table_3_8": (b"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
                           "a" + R * 3 + "b" + R + "c" + R * 2 + "d"),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_utf8_policies(name):
    raw, expected = INVALID[name]
    assert raw.decode("utf-8", errors="replace") == expected  # the reference agrees with the table
    assert _clean_one(raw, "replace") == expected
    out, reasons = data.clean_batch([b"fine", raw], invalid_utf8="drop", with_reasons=True)
    assert out.to_pylist() == ["fine", ""]
    assert reasons == [None, "invalid_utf8"]
    with pytest.raises(ValueError, match="document 1"):
        data.clean_batch([b"fine", raw, b"ok"], invalid_utf8="error")


def test_error_policy_names_lowest_document():
    docs = [b"ok"] * 5000
    docs[3000] = b"\xff"
    docs[4000] = b"\xfe"
    with pytest.raises(ValueError, match="document 3000 at byte 0"):
        data.clean_batch(docs, invalid_utf8="error")


@pytest.mark.parametrize("bad", ["Replace", "ignore", "", "strict"])
def test_bad_policy_name(bad):
    with pytest.raises(ValueError, match="invalid_utf8"):
        data.clean_batch(["x"], invalid_utf8=bad)


def test_bad_policy_suggests():
    with pytest.raises(ValueError, match="did you mean 'replace'"):
        data.clean_batch(["x"], invalid_utf8="replce")


def test_input_kinds_agree():
    docs = ["  a\r\nb  ", "", "x\x00y\n\n\n\nz", "é\t\n"]
    expected = [reference_clean(d.encode()) for d in docs]
    for texts in (docs, [d.encode() for d in docs], pa.array(docs), pa.array(docs, pa.large_string()),
                  pa.array(docs, pa.string_view()), data.StringTensor(docs), tuple(docs)):
        assert data.clean_batch(texts).to_pylist() == expected


def test_wrong_input_types():
    with pytest.raises(TypeError):
        data.clean_batch([1, 2])
    with pytest.raises(TypeError):
        data.clean_batch("a single string")
    with pytest.raises(ValueError):
        data.clean_batch(pa.array([1, 2]))


# No quadratic corner: generous bounds for a busy 2-core machine (the work is ~50 ms each).
def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def test_large_single_line_is_linear():
    line = ("word " * 10_000_000)[:50_000_000].encode()
    out, dt = _timed(lambda: data.clean_batch([line]))
    assert out.nbytes == len(line.rstrip())
    assert dt < 10


@pytest.mark.parametrize("ch", [b"a", b" ", b"\n", b"\r", b"\x00", b"\xff"])
def test_one_repeated_character(ch):
    raw = ch * 20_000_000
    out, dt = _timed(lambda: data.clean_batch([raw]))
    expected = {b"a": 20_000_000, b" ": 0, b"\n": 0, b"\r": 0, b"\x00": 0, b"\xff": 60_000_000}[ch]
    assert out.nbytes == expected
    assert dt < 10


def test_million_tiny_documents():
    docs = [b"a \n", b"", b"\tb"] * 333_334
    out, dt = _timed(lambda: data.clean_batch(docs))
    assert len(out) == len(docs)
    assert out[0] == "a" and out[1] == "" and out[2] == "b" and out[-1] == "b" and out[-3] == "a"
    assert dt < 10


def test_reused_output_memory_leaks_nothing_between_calls():
    # Chunk outputs live in strings reused across calls (and the assembled output is
    # huge-page advised): batches of several chunks, a big one, a smaller one with other
    # text, then the big one again, with 1 and 2 threads, each equal to the reference.
    big = [(f"doc {i} line\r\n  trailing  \x07\n\n\n\nmore \xc3\xa9 {i}" * (40 + i % 7)).encode()
           for i in range(3000)]
    small = [f"other {i}\t\n\nz".encode() for i in range(500)] + [b"\xff bad"]
    try:
        for threads in (1, 2):
            data.set_num_threads(threads)
            for batch in (big, small, big):
                out = data.clean_batch(batch)
                assert len(out) == len(batch)
                for i in range(0, len(batch), 97):
                    assert out[i] == reference_clean(batch[i]), (threads, i)
                assert out[len(batch) - 1] == reference_clean(batch[-1])
    finally:
        data.set_num_threads(0)  # the default
