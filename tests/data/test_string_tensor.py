"""StringTensor: both layouts against Arrow's own reading, zero-copy exchange, DLPack."""
from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from luminamoon.data import StringTensor

# Lengths 0, 12 (largest inline), 13 (smallest out-of-line) and multi-byte
# characters straddling the 12-byte inline boundary.
EDGE = ["", "a" * 12, "a" * 13, "a" * 10 + "é", "a" * 11 + "é", "a" * 11 + "€", "€" * 4, "😀" * 3, "😀" * 4,
        "short", "a much longer string that goes on", "日本語のテキスト"]


def test_basic_protocol():
    t = StringTensor(EDGE)
    assert len(t) == len(EDGE)
    assert t.to_pylist() == EDGE
    assert [t[i] for i in range(len(t))] == EDGE
    assert t[-1] == EDGE[-1]
    assert t.get_bytes(3) == EDGE[3].encode()
    assert t.nbytes == sum(len(s.encode()) for s in EDGE)
    with pytest.raises(IndexError):
        t[len(EDGE)]
    with pytest.raises(TypeError):
        t["x"]


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_pyarrow_round_trip(arrow_type):
    src = pa.array(EDGE, type=arrow_type)
    t = StringTensor(src)
    assert t.to_pylist() == EDGE
    back = pa.array(t, type=arrow_type)
    assert back.type == arrow_type
    back.validate(full=True)
    assert back.to_pylist() == EDGE
    assert pa.array(t).type == pa.large_string()


def test_large_string_import_and_export_are_zero_copy():
    src = pa.array(EDGE, type=pa.large_string())
    t = StringTensor(src)
    data, offsets = t.to_numpy()
    assert data.ctypes.data == src.buffers()[2].address  # import: no copy
    out = pa.array(t)
    assert out.buffers()[2].address == data.ctypes.data  # export: no copy
    assert out.buffers()[1].address == offsets.ctypes.data


def test_string_import_shares_bytes():
    src = pa.array(EDGE, type=pa.string())
    t = StringTensor(src)
    assert t.to_numpy()[0].ctypes.data == src.buffers()[2].address


def test_sliced_and_null_arrays():
    src = pa.array(["x", "yy", "zzz", "wwww"], type=pa.large_string()).slice(1, 2)
    t = StringTensor(src)
    assert t.to_pylist() == ["yy", "zzz"]
    data, offsets = t.to_numpy()
    assert offsets.tolist() == [0, 2, 5]
    assert bytes(data) == b"yyzzz"
    assert StringTensor(pa.array(["a", None, "c"])).to_pylist() == ["a", "", "c"]
    assert StringTensor(pa.chunked_array([["a"], ["b", "c"]])).to_pylist() == ["a", "b", "c"]


def _reference_view(s: bytes, offset: int) -> bytes:
    """Arrow's Utf8View slot, from the Arrow columnar format specification."""
    if len(s) <= 12:
        return struct.pack("<i", len(s)) + s + b"\0" * (12 - len(s))
    return struct.pack("<i", len(s)) + s[:4] + struct.pack("<ii", 0, offset)


def test_views_layout_matches_arrow_specification():
    t = StringTensor(EDGE)
    views = t.views()
    assert views.shape == (len(EDGE), 16) and views.dtype == np.uint8
    _, offsets = t.to_numpy()
    for i, s in enumerate(EDGE):
        assert bytes(views[i]) == _reference_view(s.encode(), int(offsets[i]))
    # The exported string_view array reads back through Arrow itself.
    arr = pa.array(t, type=pa.string_view())
    assert arr.buffers()[1].address == views.ctypes.data


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=30))
def test_argsort_uses_bytewise_order(items):
    t = StringTensor(items)
    order = t.argsort()
    expected = sorted(range(len(items)), key=lambda i: items[i].encode())
    assert [items[i].encode() for i in order] == [items[i].encode() for i in expected]


def test_numpy_and_torch_share_memory():
    t = StringTensor(["ab", "", "cde"])
    data, offsets = t.to_numpy()
    assert data.dtype == np.uint8 and offsets.dtype == np.int64
    assert bytes(data) == b"abcde" and offsets.tolist() == [0, 2, 2, 5]
    assert not data.flags.writeable
    torch = pytest.importorskip("torch")
    tb, to = t.to_torch()
    assert tb.dtype == torch.uint8 and to.dtype == torch.int64
    assert tb.data_ptr() == data.ctypes.data
    assert to.tolist() == [0, 2, 2, 5]
    assert t.offsets_u32().dtype == np.uint32 and t.offsets_u32().tolist() == [0, 2, 2, 5]


def test_memory_outlives_tensor():
    t = StringTensor(["hello", "world" * 10])
    arr = pa.array(t)
    data, _ = t.to_numpy()
    del t
    assert arr.to_pylist() == ["hello", "world" * 10]
    assert bytes(data[:5]) == b"hello"


def test_arrow_stream_and_polars():
    t = StringTensor(EDGE)
    assert pa.chunked_array(t).to_pylist() == EDGE
    pl = pytest.importorskip("polars")
    s = pl.Series(t)
    assert s.to_list() == EDGE
    assert StringTensor(s.to_arrow()).to_pylist() == EDGE


def test_bytes_and_empty_inputs():
    assert StringTensor([b"a", b"\xc3\xa9"]).to_pylist() == ["a", "é"]
    empty = StringTensor([])
    assert len(empty) == 0 and pa.array(empty).to_pylist() == []
    assert empty.to_numpy()[1].tolist() == [0]
    with pytest.raises(TypeError):
        StringTensor([1])
    with pytest.raises(ValueError, match="format"):
        StringTensor(pa.array([1, 2]))


def test_lone_surrogate_is_a_clear_error():
    with pytest.raises(UnicodeEncodeError):
        StringTensor(["ok", "\ud800"])
