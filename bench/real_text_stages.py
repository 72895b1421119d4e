"""Each data-engine stage alone on the real-text corpus (bench/real_text_corpus.py),
one thread, the corpus as one batch: MB of text per CPU-second, medians of 3.

    OPENBLAS_NUM_THREADS=1 python bench/real_text_stages.py [--corpus-cache PATH]

Also the spec's chain, clean + quality + exact dedup + PII, as the pipeline runs
it: each stage on what the one before kept (quality without metrics, as the
pipeline writes none by default), the CPU seconds summed, per MB of input.
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

import pyarrow as pa  # noqa: E402

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

    def cpu(fn):  # median CPU seconds of fn over 3 runs after a warm-up
        fn()
        times = []
        for _ in range(3):
            c0 = time.process_time()
            fn()
            times.append(time.process_time() - c0)
        return statistics.median(times)

    def rate(fn):
        return round(mb / cpu(fn), 1)

    def kept(t, flags):
        return data.StringTensor(t.to_arrow().filter(pa.array(flags)))

    cleaned = clean_batch(tensor)
    quality_kept = kept(cleaned, filter_quality(cleaned, metrics=False).keep)
    unique = kept(quality_kept, data.StreamDeduplicator().add(quality_kept))
    chain_s = (cpu(lambda: clean_batch(tensor)) + cpu(lambda: filter_quality(cleaned, metrics=False))
               + cpu(lambda: data.StreamDeduplicator().add(quality_kept)) + cpu(lambda: mask_pii(unique)))

    lsh = data.MinHashLSH(num_threads=1)
    print(json.dumps({"mb": round(mb, 1), "documents": len(texts),
                      "clean": rate(lambda: clean_batch(tensor)),
                      "quality": rate(lambda: filter_quality(tensor)),
                      "quality_verdict_only": rate(lambda: filter_quality(tensor, metrics=False)),
                      "exact_dedup": rate(lambda: data.StreamDeduplicator().add(tensor)),
                      "minhash_oph": rate(lambda: lsh.signatures(tensor, num_threads=1)),
                      "pii": rate(lambda: mask_pii(tensor)),
                      "chain_clean_quality_dedup_pii": round(mb / chain_s, 1),
                      "chain_documents": [len(texts), len(quality_kept.offsets_u32()) - 1, int(len(unique.offsets_u32()) - 1)]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
