"""Each data-engine stage alone on the real-text corpus (bench/real_text_corpus.py),
one thread, the corpus as one batch: MB of text per CPU-second, medians of 3.

    OPENBLAS_NUM_THREADS=1 python bench/real_text_stages.py [--corpus-cache PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import real_text_corpus  # noqa: E402

import luminamoon.data as data  # noqa: E402
from luminamoon.data.batch import clean_batch, filter_quality, mask_pii, set_num_threads  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-cache", default="/tmp/luminamoon-real-text.jsonl.gz")
    a = ap.parse_args()
    set_num_threads(1)
    texts = real_text_corpus.cached_texts(a.corpus_cache)
    tensor = data.StringTensor(texts)
    mb = sum(len(t.encode()) for t in texts) / 1e6

    def rate(fn):
        fn()
        times = []
        for _ in range(3):
            c0 = time.process_time()
            fn()
            times.append(time.process_time() - c0)
        return round(mb / statistics.median(times), 1)

    lsh = data.MinHashLSH(num_threads=1)
    print(json.dumps({"mb": round(mb, 1), "documents": len(texts),
                      "clean": rate(lambda: clean_batch(tensor)),
                      "quality": rate(lambda: filter_quality(tensor)),
                      "exact_dedup": rate(lambda: data.StreamDeduplicator().add(tensor)),
                      "minhash_oph": rate(lambda: lsh.signatures(tensor, num_threads=1)),
                      "pii": rate(lambda: mask_pii(tensor))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
