"""Exact dedup and MinHash signature throughput, side by side in one run.

On a generated corpus (default 100 MB, 20% exact and 10% near duplicates,
bench/dedup_corpus.py):
  * exact dedup: luminamoon.StreamDeduplicator (in memory; with its WAL and an
    fdatasync commit per batch) against a Python set of xxhash XXH3-64 keys
    (the floor a Python pipeline pays); documents/s and MB/s; key-set bytes
    and peak RSS growth per distinct document (a separate process);
  * MinHash signatures, 64 permutations, word 5-grams, one core: luminamoon
    against datasketch (MinHash.update_batch over the same shingles) and
    datatrove's MinhashDedupSignature stage (8 x 8, XXH3-64, its own text
    simplification; a whitespace word tokenizer, since the NLTK data its
    English default loads cannot be downloaded here) on the same documents.
Medians of --reps runs. Prints a table and writes JSON.

    .venvs/dedup/bin/python bench/dedup_throughput.py --mb 100 --out dedup_bench.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dedup_corpus  # noqa: E402

import luminamoon.data as data  # noqa: E402
from harness import measure  # noqa: E402


def wall_and_cpu(fn, reps: int) -> tuple[float, float]:
    """Medians of wall and process CPU seconds (all threads): the machine is shared,
    so CPU seconds are what the per-core figures divide by."""
    return measure(fn, reps, warmup=0).wall_and_cpu


def batches(seq, size):
    for lo in range(0, len(seq), size):
        yield seq[lo : lo + size]


MEMORY_CHILD = """
import sys, resource, luminamoon.data as data
n, track, presize = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
batch = 100_000
warm = [f"warm up {i}" for i in range(batch)]
d = data.StreamDeduplicator(track_matches=track)
d.add(warm)
del d
before = hwm()  # the peak so far: interpreter, module, one batch of strings
d = data.StreamDeduplicator(track_matches=track, expected_distinct=presize)
for lo in range(0, n, batch):
    d.add([f"distinct document number {i}" for i in range(lo, lo + batch)])
print(len(d), d.set_memory_bytes, d.memory_bytes, hwm() - before)
"""


def memory_per_document(n: int, track: bool, presize: bool = False) -> dict:
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(n), "1" if track else "0",
                          str(n if presize else 0)],
                         capture_output=True, text=True, check=True).stdout.split()
    distinct, set_bytes, all_bytes, rss_growth = map(int, out)
    return {"distinct": distinct, "set_bytes_per_doc": set_bytes / distinct,
            "structure_bytes_per_doc": all_bytes / distinct,
            "peak_rss_growth_per_doc": rss_growth / distinct}


def datasketch_signatures(docs, num_perm):
    from datasketch import MinHash

    import dedup_reference as ref  # the same normalization and shingles

    out = []
    for t in docs:
        m = MinHash(num_perm=num_perm, seed=1)
        m.update_batch(ref.shingles(t, 5))
        out.append(m.hashvalues)
    return out


def datatrove_signature_stage(docs, folder):
    from datatrove.data import Document
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.word_tokenizers import WordTokenizer

    class Whitespace(WordTokenizer):
        def word_tokenize(self, text):
            return text.split()

        def sent_tokenize(self, text):
            return [text]

        def span_tokenize(self, text):
            raise NotImplementedError

    stage = MinhashDedupSignature(
        output_folder=folder,
        config=MinhashConfig(n_grams=5, num_buckets=8, hashes_per_bucket=8,
                             hash_config=HashConfig(precision=64)),
        language=Whitespace("en"),
    )
    stage.run(Document(text=t, id=str(i)) for i, t in enumerate(docs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100.0, help="corpus size in MB")
    ap.add_argument("--anchor-mb", type=float, default=6.0, help="subset the Python anchors run on")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--memory-docs", type=int, default=4_000_000)
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--short-docs", type=int, default=2_000_000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import xxhash

    t0 = time.perf_counter()
    docs, counts = dedup_corpus.documents(int(args.mb * 1e6))
    total_bytes = sum(len(t) for t in docs)  # ASCII: characters == bytes
    print(f"corpus: {len(docs)} documents, {total_bytes / 1e6:.1f} MB, {counts}, "
          f"generated in {time.perf_counter() - t0:.1f} s", flush=True)
    tensors = [data.StringTensor(b) for b in batches(docs, args.batch)]
    conv = wall_and_cpu(lambda: [data.StringTensor(b) for b in batches(docs, args.batch)], args.reps)
    results: dict = {"documents": len(docs), "bytes": total_bytes, "counts": counts,
                     "machine": platform.processor() or platform.machine(), "reps": args.reps,
                     "list_to_StringTensor_s": conv}

    # --- exact dedup ---------------------------------------------------------
    def lm_exact(threads, wal=None):
        d = data.StreamDeduplicator(wal, num_threads=threads)
        kept = 0
        for t in tensors:
            kept += int(d.add(t).sum())
            if wal:
                d.commit()
        d.close()
        return kept

    def py_exact():
        seen = set()
        kept = 0
        for t in docs:
            k = xxhash.xxh3_64_intdigest(t.encode())
            if k not in seen:
                seen.add(k)
                kept += 1
        return kept

    exact = {}
    exact["luminamoon_1_thread"] = wall_and_cpu(lambda: lm_exact(1), args.reps)
    exact["luminamoon_2_threads"] = wall_and_cpu(lambda: lm_exact(2), args.reps)
    with tempfile.TemporaryDirectory() as tmp:
        def with_wal():
            path = os.path.join(tmp, "b.dedup")
            if os.path.exists(path):
                os.remove(path)
            lm_exact(1, path)
        exact["luminamoon_wal_fdatasync_per_batch"] = wall_and_cpu(with_wal, args.reps)
    exact["python_set_xxhash"] = wall_and_cpu(py_exact, args.reps)
    kept_lm, kept_py = lm_exact(1), py_exact()
    assert kept_lm == kept_py, (kept_lm, kept_py)
    results["exact_kept"] = kept_lm
    results["exact_seconds"] = exact
    for name, (w, c) in exact.items():
        print(f"exact  {name:36s} wall {w:7.3f} s {len(docs) / w:11,.0f} docs/s {total_bytes / w / 1e6:7.0f} MB/s"
              f" | cpu {c:7.3f} s {len(docs) / c:11,.0f} docs/cpu-s {total_bytes / c / 1e6:7.0f} MB/cpu-s")
    # Short documents (lines, titles): per-document costs dominate.
    rng = np.random.default_rng(3)
    pool = [f"short document {i} " + "x" * int(k) for i, k in enumerate(rng.integers(10, 150, args.short_docs))]
    short = [pool[i] for i in rng.integers(0, int(args.short_docs * 0.75), args.short_docs)]
    short_tensors = [data.StringTensor(b) for b in batches(short, 65536)]

    def lm_short(threads):
        d = data.StreamDeduplicator(num_threads=threads)
        return sum(int(d.add(t).sum()) for t in short_tensors)

    def py_short():
        seen = set()
        for t in short:
            seen.add(xxhash.xxh3_64_intdigest(t.encode()))
        return len(seen)

    assert lm_short(1) == py_short()
    short_res = {"luminamoon_1_thread": wall_and_cpu(lambda: lm_short(1), args.reps),
                 "luminamoon_2_threads": wall_and_cpu(lambda: lm_short(2), args.reps),
                 "python_set_xxhash": wall_and_cpu(py_short, args.reps)}
    results["exact_short_docs"] = {"documents": len(short), "bytes": sum(map(len, short)),
                                   "seconds": short_res}
    for name, (w, c) in short_res.items():
        print(f"short  {name:36s} wall {w:7.3f} s {len(short) / w:11,.0f} docs/s"
              f" | cpu {c:7.3f} s {len(short) / c:11,.0f} docs/cpu-s")
    results["exact_memory"] = {"keys_only": memory_per_document(args.memory_docs, False),
                               "keys_only_presized": memory_per_document(args.memory_docs, False, True),
                               "with_match_refs": memory_per_document(args.memory_docs, True)}
    print("memory per distinct document:", json.dumps(results["exact_memory"]), flush=True)

    # --- MinHash signatures ----------------------------------------------------
    lsh = data.MinHashLSH(num_perm=64, bands=8, rows=8, ngram=5)
    sig = {}
    sig["luminamoon_1_thread_full"] = wall_and_cpu(
        lambda: [lsh.signatures(t, num_threads=1) for t in tensors], args.reps)
    sig["luminamoon_2_threads_full"] = wall_and_cpu(
        lambda: [lsh.signatures(t, num_threads=2) for t in tensors], args.reps)
    near = data.MinHashLSH(num_threads=1)
    c0, t0 = time.process_time(), time.perf_counter()
    near_keep = np.concatenate([near.add(t)[0] for t in tensors])
    lsh_add = (time.perf_counter() - t0, time.process_time() - c0)
    results["lsh_add_1_thread_s"] = lsh_add
    results["lsh_dropped"] = int((~near_keep).sum())
    results["lsh_memory_bytes_per_kept"] = near.memory_bytes / len(near)
    subset, size = [], 0
    for t in docs:
        if size >= args.anchor_mb * 1e6:
            break
        subset.append(t)
        size += len(t)
    sub_tensor = data.StringTensor(subset)
    anchors = {}
    anchors["luminamoon_1_thread"] = wall_and_cpu(lambda: lsh.signatures(sub_tensor, num_threads=1), args.reps)
    anchors["datasketch"] = wall_and_cpu(lambda: datasketch_signatures(subset, 64), args.reps)
    with tempfile.TemporaryDirectory() as tmp:
        anchors["datatrove_signature_stage"] = wall_and_cpu(
            lambda: datatrove_signature_stage(subset, tmp), args.reps)
    results["signature_seconds_full"] = sig
    results["anchor_subset"] = {"documents": len(subset), "bytes": size}
    results["signature_seconds_subset"] = anchors
    for name, (w, c) in sig.items():
        print(f"minhash {name:35s} wall {w:7.3f} s {total_bytes / w / 1e6:7.1f} MB/s"
              f" | cpu {c:7.3f} s {total_bytes / c / 1e6:7.1f} MB/cpu-s")
    w, c = lsh_add
    print(f"lsh add (signatures + index), 1 thread: {total_bytes / w / 1e6:.1f} MB/s wall, "
          f"{total_bytes / c / 1e6:.1f} MB/cpu-s; {results['lsh_dropped']} near duplicates dropped, "
          f"{results['lsh_memory_bytes_per_kept']:.0f} B per kept document")
    base_w, base_c = anchors["luminamoon_1_thread"]
    for name, (w, c) in anchors.items():
        print(f"subset {name:36s} wall {w:7.3f} s {size / w / 1e6:7.2f} MB/s | cpu {c:7.3f} s "
              f"{size / c / 1e6:7.2f} MB/cpu-s  cpu x{c / base_c:6.1f} of luminamoon")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
