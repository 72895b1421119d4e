"""What a second busy core costs the first on this machine: the same fixed work (MinHash
signatures of 4,000 real documents, SIMD-bound; a scalar integer loop in Python) from one process,
then from two processes at once. "throughput" is 2 x (1-process seconds) / (slower of the two):
2.0 when the cores do not slow each other, about 1.0 when they share one core's units.
Issue 17's row Y2 and issue 22's row W1 ask for >= 1.7x / 1.8x from two cores; this says what the
VM itself gives.

    .venv/bin/python bench/two_core_probe.py
"""
import sys, time, os, multiprocessing as mp
sys.path.insert(0, "bench")
def minhash(n):
    import real_text_corpus, luminamoon.data as data
    texts = real_text_corpus.cached_texts("/tmp/luminamoon-real-text.jsonl.gz", 4000)
    t = data.StringTensor(texts); lsh = data.MinHashLSH(scheme="oph", num_threads=1)
    lsh.signatures(t, num_threads=1)
    t0 = time.perf_counter()
    for _ in range(n): lsh.signatures(t, num_threads=1)
    return time.perf_counter() - t0
def scalar(n):
    t0 = time.perf_counter(); x = 0
    for i in range(n * 2_000_000): x = (x * 31 + i) & 0xFFFFFFFF
    return time.perf_counter() - t0
def one(args):
    fn, n = args
    return globals()[fn](n)
if __name__ == "__main__":
    for fn, n in (("minhash", 50), ("scalar", 3)):
        for rep in range(5):
            a = one((fn, n))
            with mp.Pool(2) as p: b = p.map(one, [(fn, n)] * 2)
            print(f"{fn}: 1 process {a:.2f} s; 2 at once {b[0]:.2f} / {b[1]:.2f} s -> throughput x{2 * a / max(b):.2f}", flush=True)
