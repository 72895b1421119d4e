"""The batch API as a whole: thread count, determinism across thread counts, GIL release."""
from __future__ import annotations

import threading
import time

import pytest

import luminamoon.data.batch as data_batch
from luminamoon import data


def _docs(n=3000):
    base = ["The river and the city have a history of music, e.g. 8.8.8.8 or a@b.co.  \r\n",
            "- item one\n- item two\n\n\n\n", "x\x00y \t\n" * 3, "naïve café 東京 " * 20, ""]
    return [base[i % len(base)] * (1 + i % 7) for i in range(n)]


def test_public_names():
    for name in ("StringTensor", "QualityResult", "clean_batch", "filter_quality", "mask_pii", "quality_checks",
                 "set_num_threads", "get_num_threads", "PII_TYPES"):
        assert name in data_batch.__all__ and hasattr(data, name)


def test_thread_count_api():
    try:
        data.set_num_threads(1)
        assert data.get_num_threads() == 1
        data.set_num_threads(0)
        assert data.get_num_threads() >= 1
        with pytest.raises(ValueError):
            data.set_num_threads(-1)
    finally:
        data.set_num_threads(0)


def test_same_results_for_any_thread_count():
    docs = _docs()
    outs = []
    for threads in (1, 2, 3):
        data.set_num_threads(threads)
        c = data.clean_batch(docs)
        q = data.filter_quality(c)
        p, counts = data.mask_pii(c)
        outs.append((c.to_pylist(), q.reason, q.metrics, p.to_pylist(), counts))
    data.set_num_threads(0)
    for o in outs[1:]:
        assert o[0] == outs[0][0] and o[1] == outs[0][1] and o[2].equals(outs[0][2])
        assert o[3] == outs[0][3] and o[4] == outs[0][4]


def test_native_work_releases_the_gil():
    docs = data.StringTensor(["the quick brown fox jumps over the lazy dog " * 200] * 4000)  # ~36 MB
    done = threading.Event()
    spins = 0

    def work():
        for _ in range(3):
            data.filter_quality(docs)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.01)
    while not done.is_set():
        spins += 1
    t.join()
    # With the GIL held during the native call this loop could barely run.
    assert spins > 10_000
