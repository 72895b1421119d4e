"""MinHash signature speed on real text, one core, side by side in one run:
luminamoon's oph (the default) and kperm schemes from the text, against rensa
(PyPI, Rust) given the prebuilt word 5-gram shingles (and given their
hashes), and datasketch (update_batch on the same shingles, a subset).
64 values per signature. MB/s are input text bytes per CPU second (medians
of --reps runs; the machine is shared, so CPU seconds are what per-core
figures divide by).

    python bench/minhash_speed.py [--docs 8000] [--reps 5] [--json out.json]

The corpus is bench/real_text_corpus.py's (Debian changelogs and copyright
files, package documentation), cached as bench/pii_eval.py caches it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import dedup_reference as ref  # noqa: E402
import real_text_corpus  # noqa: E402

import luminamoon.data as data  # noqa: E402
from harness import measure  # noqa: E402


def cpu_seconds_of(fn, reps: int) -> float:
    return measure(fn, reps, warmup=0).cpu_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=8000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasketch-docs", type=int, default=1000)
    ap.add_argument("--corpus-cache", default="/tmp/luminamoon-real-text.jsonl.gz")
    ap.add_argument("--json")
    a = ap.parse_args()
    texts = real_text_corpus.cached_texts(a.corpus_cache, a.docs)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    tensor = data.StringTensor(texts)
    results = {"documents": len(texts), "mb": round(mb, 2), "rows": []}

    def row(name, seconds, megabytes=mb, note=""):
        r = {"engine": name, "cpu_s": round(seconds, 3), "mb_per_s": round(megabytes / seconds, 1), "note": note}
        results["rows"].append(r)
        print(json.dumps(r), flush=True)

    for scheme in ("oph", "kperm"):
        lsh = data.MinHashLSH(scheme=scheme, num_threads=1)
        lsh.signatures(tensor, num_threads=1)  # warm up
        row(f"luminamoon {scheme}", cpu_seconds_of(lambda: lsh.signatures(tensor, num_threads=1), a.reps),
            note="from text: normalize, shingle, hash, sign")

    t0 = time.perf_counter()
    shingles = [[s.decode("utf-8", "replace") for s in ref.shingles(t, 5)] for t in texts]
    build = time.perf_counter() - t0
    print(f"shingles built in Python: {build:.1f} s", flush=True)
    import numpy as np
    import rensa

    row("rensa RMinHash", cpu_seconds_of(lambda: rensa.RMinHash.digest_matrix_from_token_sets(shingles, 64, 1), a.reps),
        note="from prebuilt shingles (digest_matrix_from_token_sets)")
    row("rensa CMinHash", cpu_seconds_of(lambda: rensa.CMinHash.digests64_from_token_sets(shingles, 64, 1), a.reps),
        note="from prebuilt shingles (digests64_from_token_sets)")
    hashes = [rensa.RMinHash.hash_token_sets([s])[0] for s in shingles[:1]]  # API check
    flat_sets = rensa.RMinHash.hash_token_sets(shingles)
    flat = np.concatenate([np.asarray(h, dtype=np.uint64) for h in flat_sets])
    offsets = np.cumsum([0] + [len(h) for h in flat_sets]).astype(np.uint64)
    row("rensa RMinHash, hashes given",
        cpu_seconds_of(lambda: rensa.RMinHash.digest_matrix_from_flat_token_hashes(flat, offsets, 64, 1), a.reps),
        note="from prebuilt shingle hashes (digest_matrix_from_flat_token_hashes)")
    del hashes

    from datasketch import MinHash

    sub = [[s.encode() for s in shs] for shs in shingles[:a.datasketch_docs]]
    sub_mb = sum(len(t.encode()) for t in texts[:a.datasketch_docs]) / 1e6

    def datasketch_run():
        for shs in sub:
            m = MinHash(num_perm=64, seed=1)
            m.update_batch(shs)

    row("datasketch", cpu_seconds_of(datasketch_run, 1), sub_mb,
        note=f"update_batch on prebuilt shingles, first {a.datasketch_docs} documents")
    print("\n| engine | MB/s per core | input |\n| --- | ---: | --- |")
    for r in results["rows"]:
        print(f"| {r['engine']} | {r['mb_per_s']} | {r['note']} |")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
